//! One Laminar connection's receive side in emulated time: the pipeline
//! running the program, the control plane handling its digests, and the
//! host buffer the payload lands in. Examples, tests and benchmarks drive
//! it with segments from a peer and read the byte stream it delivers.

use crate::pipeline::{ControlError, InjectError, Pipeline, PipelineConfig, TraceEvent};
use crate::program::Port;
use crate::ProgramError;

use super::fields::{DESC_WORD, WORKFLOW};
use super::host::{HostError, HostReceiver};
use super::program::workflow;
use super::program::{program, LaminarConfig};
use super::segment::{flags, HostEvent, TcpSegment};
use super::{install, ConnectionSpec, ControlPlane};

/// Why driving the receiver failed.
#[derive(Debug, thiserror::Error)]
pub enum ReceiverError {
    #[error("loading the program: {0}")]
    Load(#[from] ProgramError),
    #[error("control plane: {0}")]
    Control(#[from] ControlError),
    #[error("injecting: {0}")]
    Inject(#[from] InjectError),
    #[error("host buffer: {0}")]
    Host(#[from] HostError),
    #[error("the pipeline sent bytes that do not parse: {0}")]
    Output(#[from] crate::program::ParseError),
}

/// Connection 0 of a Laminar pipeline, with its host side.
#[derive(Debug)]
pub struct Receiver {
    pub pipeline: Pipeline,
    pub control: ControlPlane,
    pub host: HostReceiver,
    pub spec: ConnectionSpec,
    /// Segments the pipeline sent to the peer (ACKs), in order.
    pub sent: Vec<TcpSegment>,
    /// Bytes the application read, in order.
    pub delivered: Vec<u8>,
    /// Window handed back by SYNCs that have passed the egress stages (from
    /// the pipeline's trace, not from what was sent).
    pub granted: u64,
}

impl Receiver {
    pub fn new(
        config: PipelineConfig,
        laminar: LaminarConfig,
        spec: ConnectionSpec,
    ) -> Result<Self, ReceiverError> {
        let mut pipeline = Pipeline::load(program(laminar), config)?;
        install(&mut pipeline, 0, &spec)?;
        pipeline.enable_trace();
        Ok(Receiver {
            pipeline,
            control: ControlPlane::default(),
            host: HostReceiver::new(
                0,
                spec.rx_buffer_addr,
                spec.rx_buffer_size,
                spec.rx_next_seq,
            ),
            spec,
            sent: Vec::new(),
            delivered: Vec::new(),
            granted: 0,
        })
    }

    /// The bytes of a segment from the peer carrying `payload` at `seq`.
    pub fn segment(&self, seq: u32, payload: &[u8]) -> Vec<u8> {
        TcpSegment {
            src_ip: self.spec.remote_ip,
            dst_ip: self.spec.local_ip,
            src_port: self.spec.remote_port,
            dst_port: self.spec.local_port,
            seq,
            ack: self.spec.tx_next_ack,
            flags: flags::ACK,
            window: 0xffff,
            sack: None,
            payload: payload.to_vec(),
        }
        .emit()
    }

    /// The peer's segment arrives at `at_ns`.
    pub fn receive(&mut self, at_ns: u64, bytes: &[u8]) -> Result<(), ReceiverError> {
        self.pipeline.inject(at_ns, Port::Mac(0), bytes)?;
        Ok(())
    }

    /// Runs the pipeline to `at_ns` one event at a time; after each, the
    /// host takes what was written to it, the control plane handles its
    /// digests, the application reads and hands space back by SYNC once a
    /// quarter of the buffer was read (§5.3.1.7), and `after_each` looks.
    pub fn run_to(
        &mut self,
        at_ns: u64,
        mut after_each: impl FnMut(&Self),
    ) -> Result<(), ReceiverError> {
        while self.pipeline.step(at_ns) {
            self.take_outputs()?;
            after_each(self);
        }
        self.pipeline.advance_to(at_ns);
        Ok(())
    }

    /// Runs until nothing is in flight.
    pub fn settle(&mut self, mut after_each: impl FnMut(&Self)) -> Result<(), ReceiverError> {
        while let Some(at) = self.pipeline.busy_until() {
            self.run_to(at, &mut after_each)?;
        }
        Ok(())
    }

    /// Consumes everything the pipeline produced; a SYNC injected here may
    /// let more packets through (injection first runs what is due), whose
    /// outputs are consumed too before anyone looks.
    fn take_outputs(&mut self) -> Result<(), ReceiverError> {
        loop {
            self.consume()?;
            let Some(sync) = self.host.sync_due(self.spec.rx_buffer_size / 4) else {
                return Ok(());
            };
            let now = self.pipeline.now();
            self.pipeline
                .inject(now, Port::Dma(self.spec.ctx), &sync.emit())?;
        }
    }

    fn consume(&mut self) -> Result<(), ReceiverError> {
        for event in self.pipeline.take_trace() {
            if let TraceEvent::Egress {
                phv,
                dropped: false,
                ..
            } = event
            {
                if phv.get(WORKFLOW) == workflow::SYNC_HOST {
                    self.granted += phv.get(DESC_WORD);
                }
            }
        }
        for out in self.pipeline.take_emitted() {
            match out.port {
                Port::Dma(_) => self.host.apply(&HostEvent::parse(&out.bytes)?)?,
                _ => self.sent.push(TcpSegment::parse(&out.bytes)?),
            }
        }
        self.control.handle(&mut self.pipeline)?;
        self.delivered.extend(self.host.read());
        Ok(())
    }
}
