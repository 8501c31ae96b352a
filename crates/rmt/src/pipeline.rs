//! The emulator: a loaded program running on packets in emulated time.
//!
//! A packet injected at a port is parsed and runs the ingress stages at its
//! arrival time, then waits in a traffic-manager queue (or is dropped there
//! when the queue is full). The egress pipeline takes one packet per slot,
//! runs the egress stages and the deparser. Mirrored copies travel the
//! mirror path back to the TM, packets the deparser sends to the
//! recirculation port travel the recirculation path back to the parser, and
//! generator applications inject packets on their timers.
//!
//! Each action receives only what it declared ([`ActionIo`]); registers
//! change only through actions, or through the control plane's
//! [`Pipeline::register_write`].

use serde::Serialize;

use crate::channel::{Channel, ChannelConfig, ChannelCounters, LossCause};
use crate::check::{self, ProgramError, MAX_KEY};
use crate::phv::{FieldMasks, Phv};
use crate::pktgen::{Generator, GeneratorApp};
use crate::program::{
    Emitted, ParseError, ParserOut, Port, Program, RegisterId, StageDecl, Verdict,
};
use crate::register::RegisterFile;
use crate::stage::{compile_stage, run_stages, CompiledStage, CompiledTable, Scratch, StageState};
use crate::table::{Entry, Key};
use crate::tm::{TmCounters, TrafficManager};

/// The hardware the program runs on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PipelineConfig {
    /// Match-action stages in each of ingress and egress (Tofino2: 20).
    pub stages: usize,
    /// TM queues, and packets each holds.
    pub tm_queues: usize,
    pub tm_queue_capacity: usize,
    /// The TM queue mirrored copies wait in.
    pub mirror_queue: usize,
    /// Time the egress pipeline takes per packet (its packet rate's inverse).
    pub egress_slot_ns: u64,
    pub mirror: ChannelConfig,
    pub recirculation: ChannelConfig,
}

impl Default for PipelineConfig {
    /// Tofino2-like: 20 stages, a mirror that takes a few hundred ns
    /// (§5.1.2) and a recirculation that takes about 750 ns (§5.4).
    fn default() -> Self {
        PipelineConfig {
            stages: 20,
            tm_queues: 2,
            tm_queue_capacity: 1024,
            mirror_queue: 1,
            egress_slot_ns: 1,
            mirror: ChannelConfig::lossless(300, 256),
            recirculation: ChannelConfig::lossless(750, 256),
        }
    }
}

/// Names one packet (a mirrored copy gets its own id and its original as
/// parent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct PacketId(pub u64);

/// Where a packet entered the pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Source {
    Port(Port),
    Mirror,
}

/// A packet on its way.
#[derive(Debug, Clone)]
struct Packet {
    id: PacketId,
    parent: Option<PacketId>,
    source: Source,
    phv: Phv,
    payload: Vec<u8>,
    verdict: Verdict,
}

/// What a run did, packet by packet (when tracing is on).
#[derive(Debug, Clone, PartialEq)]
pub enum TraceEvent {
    /// The parser rejected the packet.
    Rejected {
        id: PacketId,
        port: Port,
        error: ParseError,
    },
    /// An ingress action dropped the packet.
    IngressDropped { id: PacketId },
    /// Its TM queue was full.
    TmDropped { id: PacketId },
    /// The packet ran the egress stages; `phv` is their result.
    Egress {
        id: PacketId,
        parent: Option<PacketId>,
        source: Source,
        at_ns: u64,
        dropped: bool,
        phv: Phv,
    },
    /// A mirrored copy (with `phv` as the mirror parser made it) or a
    /// recirculated packet was lost on its path.
    Lost {
        id: PacketId,
        parent: Option<PacketId>,
        path: Path,
        cause: LossCause,
        phv: Option<Phv>,
    },
}

/// The two ways back into the pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Path {
    Mirror,
    Recirculation,
}

/// The two halves of the pipeline, each a sequence of stages, with the
/// traffic manager between them (thesis §5.1.1).
#[derive(Debug, Clone, Copy)]
enum Half {
    Ingress,
    Egress,
}

/// A copy of a packet's PHV sent to the control plane.
#[derive(Debug, Clone, PartialEq)]
pub struct Digest {
    pub at_ns: u64,
    pub id: PacketId,
    pub phv: Phv,
}

/// Counts of what the pipeline did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    pub injected: u64,
    pub rejected: u64,
    pub ingress_dropped: u64,
    pub egress_processed: u64,
    pub egress_dropped: u64,
    /// Actions skipped because their register index was out of range (the
    /// packet is dropped).
    pub register_faults: u64,
    pub emitted: u64,
    pub digests: u64,
    pub generated: u64,
    pub tm: TmCounters,
    pub mirror: ChannelCounters,
    pub recirculation: ChannelCounters,
}

/// Why an injection or a control-plane call was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
    #[error("no table `{0}`")]
    UnknownTable(String),
    #[error("table `{table}` has no action `{action}`")]
    UnknownAction { table: String, action: String },
    #[error("table `{table}`: {reason}")]
    BadEntry { table: String, reason: String },
    #[error("table `{table}` has no entry for key {key:?}")]
    NoEntry { table: String, key: Vec<u64> },
    #[error("no register `{0}`")]
    UnknownRegister(String),
    #[error("register `{register}` has {entries} cells, no cell {index}")]
    BadIndex {
        register: String,
        entries: usize,
        index: usize,
    },
    #[error("time goes forward only: {at_ns} ns is before now ({now_ns} ns)")]
    TimeWentBack { at_ns: u64, now_ns: u64 },
}

/// A loaded program and the state of the hardware running it.
pub struct Pipeline {
    program: Program,
    config: PipelineConfig,
    masks: Vec<u64>,
    field_masks: FieldMasks,
    parser_allowed: Vec<bool>,
    ingress: Vec<CompiledStage>,
    egress: Vec<CompiledStage>,
    registers: RegisterFile,
    tm: TrafficManager<Packet>,
    mirror: Channel<Packet>,
    recirculation: Channel<Vec<u8>>,
    generators: Vec<Generator>,
    now: u64,
    egress_free_at: u64,
    next_id: u64,
    scratch: Scratch,
    pool: Pool,
    emitted: Vec<Emitted>,
    scratch_out: Vec<Emitted>,
    digests: Vec<Digest>,
    trace: Option<Vec<TraceEvent>>,
    counters: Counters,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("program", &self.program.name)
            .field("now", &self.now)
            .field("counters", &self.counters)
            .finish()
    }
}

impl Pipeline {
    /// Checks `program` against the hardware's rules and loads it, all
    /// registers zero and all tables empty.
    pub fn load(program: Program, config: PipelineConfig) -> Result<Self, ProgramError> {
        check::check(&program, config.stages)?;
        let masks: Vec<u64> = program.fields.iter().map(|f| f.mask()).collect();
        let mut parser_allowed = vec![false; program.fields.len()];
        for f in &program.parser.produces {
            parser_allowed[f.index()] = true;
        }
        let registers = RegisterFile::new(&program);
        let compile = |stages: &[StageDecl]| {
            stages
                .iter()
                .map(|s| compile_stage(&program, &registers, s))
                .collect()
        };
        let ingress = compile(&program.ingress);
        let egress = compile(&program.egress);
        Ok(Pipeline {
            registers,
            tm: TrafficManager::new(config.tm_queues, config.tm_queue_capacity),
            mirror: Channel::new(config.mirror.clone()),
            recirculation: Channel::new(config.recirculation.clone()),
            generators: Vec::new(),
            now: 0,
            egress_free_at: 0,
            next_id: 0,
            scratch: Scratch::default(),
            pool: Pool::default(),
            emitted: Vec::new(),
            scratch_out: Vec::new(),
            digests: Vec::new(),
            trace: None,
            counters: Counters::default(),
            field_masks: FieldMasks::new(&program.fields),
            masks,
            parser_allowed,
            ingress,
            egress,
            program,
            config,
        })
    }

    /// The emulated time, in ns.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// Records a [`TraceEvent`] for every packet from now on.
    pub fn enable_trace(&mut self) {
        self.trace.get_or_insert_with(Vec::new);
    }

    pub fn take_trace(&mut self) -> Vec<TraceEvent> {
        self.trace.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Packets that left through the ports.
    pub fn take_emitted(&mut self) -> Vec<Emitted> {
        std::mem::take(&mut self.emitted)
    }

    /// The packets that left so far, still held.
    pub fn emitted(&self) -> &[Emitted] {
        &self.emitted
    }

    /// Drops the packets that left so far (a sink that only counts them).
    pub fn clear_emitted(&mut self) {
        self.emitted.clear();
    }

    pub fn take_digests(&mut self) -> Vec<Digest> {
        std::mem::take(&mut self.digests)
    }

    pub fn counters(&self) -> Counters {
        Counters {
            tm: self.tm.counters(),
            mirror: self.mirror.counters(),
            recirculation: self.recirculation.counters(),
            ..self.counters
        }
    }

    /// Adds a packet-generator application; its first batch is due at
    /// `app.start_ns`.
    pub fn add_generator(&mut self, app: GeneratorApp) {
        self.generators.push(Generator::new(app));
    }

    fn register_named(&self, name: &str) -> Result<RegisterId, ControlError> {
        self.program
            .registers
            .iter()
            .position(|r| r.name == name)
            .map(|i| RegisterId(i as u16))
            .ok_or_else(|| ControlError::UnknownRegister(name.into()))
    }

    /// Control plane: reads cell `index` of register `name`.
    pub fn register_read(&self, name: &str, index: usize) -> Result<u64, ControlError> {
        let r = self.register_named(name)?.index();
        self.registers
            .read(r, index)
            .ok_or_else(|| ControlError::BadIndex {
                register: name.into(),
                entries: self.registers.layout(r).entries,
                index,
            })
    }

    /// Control plane: writes cell `index` of register `name` (truncated to
    /// the register's width).
    pub fn register_write(
        &mut self,
        name: &str,
        index: usize,
        value: u64,
    ) -> Result<(), ControlError> {
        let r = self.register_named(name)?.index();
        if self.registers.write(r, index, value) {
            Ok(())
        } else {
            Err(ControlError::BadIndex {
                register: name.into(),
                entries: self.registers.layout(r).entries,
                index,
            })
        }
    }

    /// Control plane: installs an entry in an exact-match table (or
    /// replaces the entry its key already has).
    pub fn table_add(
        &mut self,
        table: &str,
        key: &[u64],
        action: &str,
        data: &[u64],
    ) -> Result<(), ControlError> {
        let (t, k) = self.table_and_key(table, key)?;
        let bad = |reason: String| ControlError::BadEntry {
            table: table.into(),
            reason,
        };
        let a = t
            .actions
            .iter()
            .position(|a| a.name == action)
            .ok_or_else(|| ControlError::UnknownAction {
                table: table.into(),
                action: action.into(),
            })?;
        if data.len() != t.actions[a].data {
            return Err(bad(format!(
                "action `{action}` takes {} data words, {} given",
                t.actions[a].data,
                data.len()
            )));
        }
        let entry = Entry {
            action: a,
            data: data.into(),
        };
        let size = t.entries.size();
        t.entries
            .insert(k, entry)
            .map_err(|_| bad(format!("is full ({size} entries)")))
    }

    /// Control plane: deletes the entry of `key` from an exact-match table,
    /// as the hardware's control plane does when a flow ends; packets with
    /// that key miss from now on. Deleting a key the table does not hold is
    /// an error ([`ControlError::NoEntry`]).
    pub fn table_delete(&mut self, table: &str, key: &[u64]) -> Result<(), ControlError> {
        let (t, k) = self.table_and_key(table, key)?;
        match t.entries.remove(&k) {
            Some(_) => Ok(()),
            None => Err(ControlError::NoEntry {
                table: table.into(),
                key: key.to_vec(),
            }),
        }
    }

    /// Control plane: the action and data of the entry `key` has in
    /// `table`, `None` if it has none.
    pub fn table_read(
        &mut self,
        table: &str,
        key: &[u64],
    ) -> Result<Option<(&str, &[u64])>, ControlError> {
        let (t, k) = self.table_and_key(table, key)?;
        let t = &*t;
        Ok(t.entries
            .get(&k)
            .map(|e| (t.actions[e.action].name.as_str(), &*e.data)))
    }

    /// Control plane: how many entries `table` holds.
    pub fn table_len(&self, table: &str) -> Result<usize, ControlError> {
        self.ingress
            .iter()
            .chain(&self.egress)
            .flat_map(|s| &s.tables)
            .find(|t| t.name == table)
            .map(|t| t.entries.len())
            .ok_or_else(|| ControlError::UnknownTable(table.into()))
    }

    /// The table named `table` and `key` as its match key (each value
    /// truncated to its field's width).
    fn table_and_key(
        &mut self,
        table: &str,
        key: &[u64],
    ) -> Result<(&mut CompiledTable, Key), ControlError> {
        let t = self
            .ingress
            .iter_mut()
            .chain(self.egress.iter_mut())
            .flat_map(|s| s.tables.iter_mut())
            .find(|t| t.name == table)
            .ok_or_else(|| ControlError::UnknownTable(table.into()))?;
        let fields = t.entries.key();
        if fields.is_empty() || key.len() != fields.len() {
            return Err(ControlError::BadEntry {
                table: table.into(),
                reason: format!("a key has {} fields, {} given", fields.len(), key.len()),
            });
        }
        let mut k = [0; MAX_KEY];
        for ((slot, v), f) in k.iter_mut().zip(key).zip(fields) {
            *slot = v & self.masks[*f];
        }
        Ok((t, k))
    }

    /// A packet arrives at `port` at time `at_ns`: first everything due
    /// before then happens, then the packet is parsed and runs ingress. A
    /// packet the parser rejects is counted and its error returned.
    pub fn inject(
        &mut self,
        at_ns: u64,
        port: Port,
        bytes: &[u8],
    ) -> Result<PacketId, InjectError> {
        if at_ns < self.now {
            return Err(InjectError::Control(ControlError::TimeWentBack {
                at_ns,
                now_ns: self.now,
            }));
        }
        self.advance_to(at_ns);
        self.counters.injected += 1;
        let id = self.new_id();
        self.parse_and_ingress(id, port, bytes)?;
        Ok(id)
    }

    /// Runs everything due up to and including `at_ns`.
    pub fn advance_to(&mut self, at_ns: u64) {
        while let Some(at) = self.next_event() {
            if at > at_ns {
                break;
            }
            self.now = self.now.max(at);
            self.run_event();
        }
        self.now = self.now.max(at_ns);
    }

    /// Runs the next event if it is due by `limit_ns`; returns whether one
    /// ran.
    pub fn step(&mut self, limit_ns: u64) -> bool {
        match self.next_event() {
            Some(at) if at <= limit_ns => {
                self.now = self.now.max(at);
                self.run_event();
                true
            }
            _ => false,
        }
    }

    /// When the next queued or travelling packet is due (generators
    /// aside); `None` when nothing is.
    pub fn busy_until(&self) -> Option<u64> {
        // Pairwise rather than over an array of options: this runs before
        // every event, and the array cost a store-forwarding stall.
        let egress = self.tm.earliest().map(|e| e.max(self.egress_free_at));
        let paths = earliest(
            self.mirror.next_delivery(),
            self.recirculation.next_delivery(),
        );
        earliest(egress, paths)
    }

    /// Runs until nothing is queued or on a path (generators aside), at most
    /// to `limit_ns`; returns whether it went idle.
    pub fn run_until_idle(&mut self, limit_ns: u64) -> bool {
        loop {
            match self.busy_until() {
                None => return true,
                Some(at) if at > limit_ns => return false,
                Some(at) => self.advance_to(at),
            }
        }
    }

    fn new_id(&mut self) -> PacketId {
        self.next_id += 1;
        PacketId(self.next_id)
    }

    fn next_event(&self) -> Option<u64> {
        let generators = self.generators.iter().map(|g| g.next_ns).min();
        earliest(self.busy_until(), generators)
    }

    /// Runs one event due now: paths first, then generators, then egress.
    fn run_event(&mut self) {
        let now = self.now;
        match self.mirror.deliver(now) {
            Some(Ok(packet)) => {
                let queue = self.config.mirror_queue;
                self.enqueue(queue, packet);
                return;
            }
            Some(Err((cause, lost))) => {
                self.mirror_lost(cause, lost);
                return;
            }
            None => {}
        }
        match self.recirculation.deliver(now) {
            Some(Ok(bytes)) => {
                let id = self.new_id();
                let _ = self.parse_and_ingress(id, Port::Recirculation, &bytes);
                return;
            }
            Some(Err((cause, _))) => {
                let id = self.new_id();
                self.record(|| TraceEvent::Lost {
                    id,
                    parent: None,
                    path: Path::Recirculation,
                    cause,
                    phv: None,
                });
                return;
            }
            None => {}
        }
        if let Some(g) = self.generators.iter().position(|g| g.next_ns <= now) {
            let packets: Vec<_> = self.generators[g].fire().collect();
            let app = self.generators[g].app.app;
            for bytes in packets {
                self.counters.generated += 1;
                let id = self.new_id();
                let _ = self.parse_and_ingress(id, Port::Generator(app), &bytes);
            }
            return;
        }
        if self.egress_free_at <= now {
            if let Some(packet) = self.tm.dequeue(now) {
                self.egress_free_at = now + self.config.egress_slot_ns;
                self.run_egress(packet);
            }
        }
    }

    fn parse_and_ingress(
        &mut self,
        id: PacketId,
        port: Port,
        bytes: &[u8],
    ) -> Result<(), InjectError> {
        let mut phv = self.pool.phv(self.masks.len());
        let mut out = ParserOut {
            phv: &mut phv,
            allowed: &self.parser_allowed,
            masks: &self.masks,
            fault: None,
        };
        let parsed = (self.program.parser.run)(port, bytes, &mut out);
        let parsed = match (parsed, out.fault) {
            (_, Some(field)) => Err(ParseError::UndeclaredField { field }),
            (Ok(len), None) if len > bytes.len() => Err(ParseError::TooShort {
                header: "declared",
                len: bytes.len(),
                need: len,
            }),
            (result, None) => result,
        };
        let header_len = match parsed {
            Ok(len) => len,
            Err(error) => {
                self.pool.phvs.push(phv);
                self.counters.rejected += 1;
                self.record(|| TraceEvent::Rejected {
                    id,
                    port,
                    error: error.clone(),
                });
                return Err(InjectError::Parse(error));
            }
        };
        let mut packet = Packet {
            id,
            parent: None,
            source: Source::Port(port),
            phv,
            payload: self.pool.bytes(&bytes[header_len..]),
            verdict: Verdict::default(),
        };
        self.run_half(Half::Ingress, &mut packet);
        self.side_outputs(&packet);
        if packet.verdict.drop {
            self.counters.ingress_dropped += 1;
            self.record(|| TraceEvent::IngressDropped { id });
            self.pool.recycle(packet);
            return Ok(());
        }
        let queue = usize::from(packet.verdict.queue);
        self.enqueue(queue, packet);
        Ok(())
    }

    /// Runs `packet` through the stages of one half of the pipeline, with
    /// the registers every stage of both halves shares.
    fn run_half(&mut self, half: Half, packet: &mut Packet) {
        let stages = match half {
            Half::Ingress => &self.ingress,
            Half::Egress => &self.egress,
        };
        run_stages(
            stages,
            &mut StageState {
                registers: &mut self.registers,
                masks: &self.field_masks,
                scratch: &mut self.scratch,
                faults: &mut self.counters.register_faults,
            },
            &mut packet.phv,
            &mut packet.verdict,
        );
    }

    fn enqueue(&mut self, queue: usize, packet: Packet) {
        let now = self.now;
        if let Err(packet) = self.tm.enqueue(now, queue, packet) {
            let id = packet.id;
            self.record(|| TraceEvent::TmDropped { id });
            self.pool.recycle(packet);
        }
    }

    fn run_egress(&mut self, mut packet: Packet) {
        self.counters.egress_processed += 1;
        packet.verdict = Verdict {
            queue: packet.verdict.queue,
            ..Verdict::default()
        };
        self.run_half(Half::Egress, &mut packet);
        let dropped = packet.verdict.drop;
        let at_ns = self.now;
        self.record(|| TraceEvent::Egress {
            id: packet.id,
            parent: packet.parent,
            source: packet.source,
            at_ns,
            dropped,
            phv: packet.phv.clone(),
        });
        self.side_outputs(&packet);
        if dropped {
            self.counters.egress_dropped += 1;
            self.pool.recycle(packet);
            return;
        }
        let mut out = std::mem::take(&mut self.scratch_out);
        (self.program.deparser.run)(&packet.phv, &packet.payload, &mut out);
        for e in out.drain(..) {
            if e.port == Port::Recirculation {
                if let Err((cause, _)) = self.recirculation.offer(self.now, e.bytes) {
                    let id = packet.id;
                    self.record(|| TraceEvent::Lost {
                        id,
                        parent: Some(id),
                        path: Path::Recirculation,
                        cause,
                        phv: None,
                    });
                }
            } else {
                self.counters.emitted += 1;
                self.emitted.push(e);
            }
        }
        self.scratch_out = out;
        self.pool.recycle(packet);
    }

    /// The mirror copy and the digest a pass asked for.
    fn side_outputs(&mut self, packet: &Packet) {
        if packet.verdict.digest {
            self.counters.digests += 1;
            self.digests.push(Digest {
                at_ns: self.now,
                id: packet.id,
                phv: packet.phv.clone(),
            });
        }
        if packet.verdict.mirror {
            let mut phv = self.pool.copy_of(&packet.phv);
            if let Some(parse) = self.program.mirror_parser {
                parse(&mut phv);
                phv.truncate(&self.masks);
            }
            let copy = Packet {
                id: self.new_id(),
                parent: Some(packet.id),
                source: Source::Mirror,
                phv,
                payload: Vec::new(),
                verdict: Verdict {
                    queue: self.config.mirror_queue as u8,
                    ..Verdict::default()
                },
            };
            if let Err((cause, lost)) = self.mirror.offer(self.now, copy) {
                self.mirror_lost(cause, lost);
            }
        }
    }

    /// Records a mirror copy the mirror path lost, offered or in flight.
    fn mirror_lost(&mut self, cause: LossCause, lost: Packet) {
        self.record(|| TraceEvent::Lost {
            id: lost.id,
            parent: lost.parent,
            path: Path::Mirror,
            cause,
            phv: Some(lost.phv),
        });
    }

    fn record(&mut self, event: impl FnOnce() -> TraceEvent) {
        if let Some(trace) = &mut self.trace {
            trace.push(event());
        }
    }
}

/// The earlier of two times, either of which may be absent.
fn earliest(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Why [`Pipeline::inject`] did not take a packet.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InjectError {
    #[error("parser: {0}")]
    Parse(#[from] ParseError),
    #[error(transparent)]
    Control(#[from] ControlError),
}

/// PHVs and payload buffers of packets that left, reused for the next
/// ones (an allocation and a free less per packet).
#[derive(Debug, Default)]
struct Pool {
    phvs: Vec<Phv>,
    payloads: Vec<Vec<u8>>,
}

impl Pool {
    /// Most buffers of each kind kept.
    const KEEP: usize = 1024;

    fn phv(&mut self, fields: usize) -> Phv {
        match self.phvs.pop() {
            Some(mut phv) => {
                phv.reset(fields);
                phv
            }
            None => Phv::new(fields),
        }
    }

    /// A copy of `phv` in a reused buffer (no clearing first).
    fn copy_of(&mut self, phv: &Phv) -> Phv {
        match self.phvs.pop() {
            Some(mut copy) => {
                copy.copy_from(phv);
                copy
            }
            None => phv.clone(),
        }
    }

    fn bytes(&mut self, from: &[u8]) -> Vec<u8> {
        let mut b = self.payloads.pop().unwrap_or_default();
        b.clear();
        b.extend_from_slice(from);
        b
    }

    fn recycle(&mut self, packet: Packet) {
        if self.phvs.len() < Self::KEEP {
            self.phvs.push(packet.phv);
        }
        if self.payloads.len() < Self::KEEP && packet.payload.capacity() > 0 {
            self.payloads.push(packet.payload);
        }
    }
}
