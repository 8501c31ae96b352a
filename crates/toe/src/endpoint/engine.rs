//! The engines behind one interface, chosen once when the endpoint is
//! made (issue 23 section 1).
//!
//! The endpoint is one TCP: the handshake and teardown (`open` and the
//! endpoint's control plane), the timers ([`super::timer`]), loss
//! recovery ([`crate::recovery`]) and congestion control (`flow`,
//! [`crate::cc`]) exist once, for every engine. An engine supplies the
//! receive and transmit of established connections; the methods below
//! are the whole of what it supplies, each one `match` on the engine
//! chosen. Where the state of each piece lives (thesis Table 4.1):
//!
//! | piece | run-to-completion | pipelined | Laminar |
//! |---|---|---|---|
//! | sequence state, out-of-order store, SACK blocks, loss state | protocol partition (`stages::Protocol`) | protocol partition, in the pipeline's protocol stage (its only per-connection atomic stage, section 4.3.2) | the program's registers (receive); the control plane's [`crate::recovery::LossState`] beside each transmit side |
//! | congestion control, rate, timers | control plane | control plane | control plane (the rate becomes credits) |
//! | application buffers | the endpoint | the endpoint | the endpoint (written by the program's DMA) |

use std::time::Instant;

use super::laminar::LaminarPath;
use super::pipelined::{Installed, PipelinePath};
use super::{ConnIdx, Endpoint, FourTuple, Handshake, PipelineLayout, ToeError};
use crate::protocol::RxSummary;
use crate::recovery::LossInfo;
use crate::segment::{Flags, Segment};

/// The data path that carries established connections.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Engine {
    /// The run-to-completion stages (thesis chapter 4's baseline).
    #[default]
    Toe,
    /// Laminar's program in the match-action emulator (chapter 5); IPv6
    /// connections run through it with 32-bit address handles
    /// ([`crate::laminar::AddressHandles`]).
    Laminar,
    /// The fine-grained pipeline of chapter 4 (section 4.3) on worker
    /// threads, laid out as given.
    Pipeline(PipelineLayout),
}

/// An [`Engine`] as the command line chooses it: its name, and the layout
/// a pipelined one runs with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct EngineChoice {
    /// What carries established connections: toe's run-to-completion
    /// stages (FlexTOE's baseline), Laminar's match-action program in the
    /// RMT emulator (IPv4 and IPv6), or FlexTOE's fine-grained pipeline on
    /// worker threads (laid out by the --pipeline-* options). Opens, closes
    /// and timeouts are the endpoint's control plane either way.
    #[cfg_attr(feature = "clap", arg(long, value_enum, default_value_t))]
    pub engine: EngineName,
    #[cfg_attr(feature = "clap", command(flatten))]
    pub layout: PipelineLayout,
}

/// An [`Engine`]'s name.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum EngineName {
    #[default]
    Toe,
    Laminar,
    Pipeline,
}

impl EngineChoice {
    /// The engine chosen; the layout counts only for the pipelined one.
    pub fn engine(&self) -> Engine {
        match self.engine {
            EngineName::Toe => Engine::Toe,
            EngineName::Laminar => Engine::Laminar,
            EngineName::Pipeline => Engine::Pipeline(self.layout),
        }
    }
}

/// The engine an endpoint runs, with its state: one, for the endpoint's
/// life (boxed: the paths are large and the run-to-completion engine
/// keeps none).
pub(super) enum EnginePath {
    Toe,
    Laminar(Box<LaminarPath>),
    Pipeline(Box<PipelinePath>),
}

impl EnginePath {
    pub(super) fn new(engine: Engine, max_conns: u32, start: Instant) -> Result<Self, ToeError> {
        Ok(match engine {
            Engine::Toe => EnginePath::Toe,
            Engine::Laminar => EnginePath::Laminar(Box::new(LaminarPath::new(max_conns)?)),
            Engine::Pipeline(layout) => {
                EnginePath::Pipeline(Box::new(PipelinePath::new(layout, start)?))
            }
        })
    }

    pub(super) fn laminar(&self) -> Option<&LaminarPath> {
        match self {
            EnginePath::Laminar(p) => Some(p),
            _ => None,
        }
    }

    pub(super) fn laminar_mut(&mut self) -> Option<&mut LaminarPath> {
        match self {
            EnginePath::Laminar(p) => Some(p),
            _ => None,
        }
    }

    pub(super) fn pipeline(&self) -> Option<&PipelinePath> {
        match self {
            EnginePath::Pipeline(p) => Some(p),
            _ => None,
        }
    }

    pub(super) fn pipeline_mut(&mut self) -> Option<&mut PipelinePath> {
        match self {
            EnginePath::Pipeline(p) => Some(p),
            _ => None,
        }
    }
}

impl Endpoint {
    /// A segment of an established connection, with its `frame` when it
    /// came as one: true if the engine took it; the run-to-completion
    /// engine (and an engine that handed the connection back) leaves it
    /// to the protocol stage.
    pub(super) fn engine_input(
        &mut self,
        conn: ConnIdx,
        seg: &Segment<'_>,
        summary: &RxSummary,
        frame: Option<&[u8]>,
    ) -> bool {
        match (&self.engine, frame) {
            (EnginePath::Toe, _) => false,
            (EnginePath::Laminar(_), _) => self.laminar_input(conn, seg, summary),
            (EnginePath::Pipeline(_), Some(f)) => {
                self.pipelined_input(conn, f, seg.flags.has(Flags::FIN))
            }
            (EnginePath::Pipeline(_), None) => self.pipelined_segment(conn, seg),
        }
    }

    /// Once per poll, after the received frames: the engine's own work.
    pub(super) fn engine_run(&mut self) -> Result<(), ToeError> {
        match self.engine {
            EnginePath::Toe => Ok(()),
            EnginePath::Laminar(_) => self.laminar_run(),
            EnginePath::Pipeline(_) => self.pipeline_run(),
        }
    }

    /// The handshake completed: the engine takes the connection.
    pub(super) fn engine_install(
        &mut self,
        conn: ConnIdx,
        t: &FourTuple,
        h: &Handshake,
        remote_win: u32,
        installed: Installed,
    ) {
        match self.engine {
            EnginePath::Toe => {}
            EnginePath::Laminar(_) => self.install_laminar(conn, t, h, remote_win),
            EnginePath::Pipeline(_) => self.install_pipelined(conn, installed),
        }
    }

    /// The connection is gone (reset or freed): the engine lets it go.
    pub(super) fn engine_release(&mut self, conn: ConnIdx) {
        match self.engine {
            EnginePath::Toe => {}
            EnginePath::Laminar(_) => self.release_laminar(conn),
            EnginePath::Pipeline(_) => self.release_pipelined(conn),
        }
    }

    /// The application read `n` bytes: true if the engine gives the
    /// window back itself.
    pub(super) fn engine_consumed(&mut self, conn: ConnIdx, n: u32) -> bool {
        match self.engine {
            EnginePath::Toe => false,
            EnginePath::Laminar(_) => self.laminar_consumed(conn, n),
            EnginePath::Pipeline(_) => self.pipelined_consumed(conn, n),
        }
    }

    /// The application queued `n` bytes: true if the engine sends them.
    pub(super) fn engine_queued(&mut self, conn: ConnIdx, n: u32) -> bool {
        match self.engine {
            EnginePath::Toe => false,
            EnginePath::Laminar(_) => self.laminar_queued(conn, n),
            EnginePath::Pipeline(_) => self.pipelined_queued(conn, n),
        }
    }

    /// The application closed: true if the engine sends the FIN when
    /// its data is out.
    pub(super) fn engine_close(&mut self, conn: ConnIdx) -> bool {
        match self.engine {
            EnginePath::Toe => false,
            EnginePath::Laminar(_) => self.laminar_close(conn),
            EnginePath::Pipeline(_) => self.pipelined_close(conn),
        }
    }

    /// RCV.NXT where the engine keeps it itself (Laminar's registers),
    /// for RFC 5961's check of a RST.
    pub(super) fn engine_rcv_nxt(&mut self, conn: ConnIdx) -> Option<u32> {
        match self.engine {
            EnginePath::Laminar(_) => self.laminar_rcv_nxt(conn),
            _ => None,
        }
    }

    /// A challenge ACK (RFC 5961) built from the engine's state: true if
    /// the engine sent it.
    pub(super) fn engine_challenge_ack(&mut self, conn: ConnIdx) -> bool {
        match self.engine {
            EnginePath::Laminar(_) => self.laminar_challenge_ack(conn),
            _ => false,
        }
    }

    /// Congestion control changed the flow's window or rate: an engine
    /// that enforces it itself hears of it (Laminar: credits).
    pub(super) fn engine_rate_changed(&mut self, conn: ConnIdx) {
        if let EnginePath::Laminar(_) = self.engine {
            self.laminar_set_rate(conn);
        }
    }

    /// What congestion control reads (bytes acknowledged, of them with
    /// ECN-Echo, recovery episodes), where the engine counts it itself.
    pub(super) fn engine_flow_counts(&self, conn: ConnIdx) -> Option<(u64, u64, u32)> {
        match self.engine {
            EnginePath::Laminar(_) => self.laminar_flow_counts(conn),
            _ => None,
        }
    }

    /// SND.UNA, SND.MAX and what TCP_INFO reports of the loss state, where
    /// the engine keeps them itself (Laminar's transmit side, the
    /// pipeline's published protocol state).
    pub(super) fn engine_loss(&self, conn: ConnIdx, mss: u32) -> Option<(u32, u32, LossInfo)> {
        match self.engine {
            EnginePath::Toe => None,
            EnginePath::Laminar(_) => self
                .laminar_loss(conn)
                .map(|(l, sent)| (sent.una, sent.max, l.info(sent, mss))),
            EnginePath::Pipeline(_) => {
                let s = self.conn_snapshot(conn);
                let loss = self.pipelined_loss(conn)?;
                Some((s.seq.wrapping_sub(s.tx_sent), s.seq, loss))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The layout reaches only the pipelined engine; the default is toe's.
    #[test]
    fn an_engine_choice_names_its_engine() {
        let layout = crate::PipelineLayout {
            threads: 2,
            ..Default::default()
        };
        let chosen = |engine| EngineChoice { engine, layout }.engine();
        assert_eq!(EngineChoice::default().engine(), Engine::Toe);
        assert_eq!(chosen(EngineName::Toe), Engine::Toe);
        assert_eq!(chosen(EngineName::Laminar), Engine::Laminar);
        assert_eq!(chosen(EngineName::Pipeline), Engine::Pipeline(layout));
    }

    /// `--engine` and the `--pipeline-*` counts parse into the choice; a
    /// count of 0, or more than 255 flow groups, is refused.
    #[cfg(feature = "clap")]
    #[test]
    fn engine_options_parse_into_the_choice() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            choice: EngineChoice,
        }
        let parse = |argv: &[&str]| Cli::try_parse_from([&["t"][..], argv].concat());
        assert_eq!(parse(&[]).unwrap().choice, EngineChoice::default());
        let choice = parse(&["--engine", "pipeline", "--pipeline-threads", "3"])
            .unwrap()
            .choice;
        assert_eq!(
            choice.engine(),
            Engine::Pipeline(crate::PipelineLayout {
                threads: 3,
                ..Default::default()
            })
        );
        assert!(parse(&["--pipeline-groups", "256"]).is_err());
        assert!(parse(&["--pipeline-copy", "0"]).is_err());
        assert!(parse(&["--engine", "kernel"]).is_err());
    }
}
