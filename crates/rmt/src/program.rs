//! How a program is declared: fields, registers, a parser, ingress and
//! egress stages of match tables whose actions name what they touch, and a
//! deparser.
//!
//! A declaration is what the emulator checks ([`crate::check`]) and what it
//! enforces while running: an action receives the values of the fields it
//! declared to read, slots for the fields it declared to write and the
//! entries of the registers it declared, and nothing else (see
//! [`ActionIo`]). So the checks are about the code that really runs.

use serde::Serialize;

use crate::phv::{FieldDecl, FieldId, Phv};

/// Where a packet enters or leaves the pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Port {
    /// A network port (the MAC).
    Mac(u8),
    /// A host DMA channel (one per application context).
    Dma(u8),
    /// The packet generator, application number.
    Generator(u8),
    /// The recirculation port: a packet the egress deparser sent back in.
    Recirculation,
}

/// Which half of the pipeline a stage is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Gress {
    Ingress,
    Egress,
}

impl std::fmt::Display for Gress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Gress::Ingress => "ingress",
            Gress::Egress => "egress",
        })
    }
}

/// Index of a register in a program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct RegisterId(pub(crate) u16);

impl RegisterId {
    /// Position of the register in the program.
    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}

/// A stateful register array: `entries` cells of `bytes` bytes, the cell a
/// packet touches chosen by the value of `index` (e.g. the connection).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RegisterDecl {
    pub name: String,
    pub bytes: u8,
    pub entries: u32,
    pub index: FieldId,
}

/// What a stage's action decides for the packet besides field values.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Drop the packet: the deparser's output to ports is discarded (a
    /// mirror copy and a digest are still made, as in hardware).
    pub drop: bool,
    /// The TM queue the packet waits in (set in ingress).
    pub queue: u8,
    /// Mirror the PHV: a copy goes back to the TM through the mirror path.
    pub mirror: bool,
    /// Send a digest (a copy of the PHV) to the control plane.
    pub digest: bool,
}

/// What an action may touch, and nothing more: the values of its declared
/// reads (in declared order, as the PHV held them when the packet entered
/// the stage), its table entry's action data, its declared writes (in
/// declared order, holding the current values until written) and the cells
/// of its declared registers (in declared order) for this packet.
pub struct ActionIo<'a> {
    pub reads: &'a [u64],
    pub data: &'a [u64],
    pub writes: &'a mut [u64],
    pub registers: &'a mut [u64],
    pub verdict: &'a mut Verdict,
}

/// The code of an action.
pub type ActionFn = fn(&mut ActionIo<'_>);

/// An action: its name, what it reads, writes and read-modify-writes, how
/// many words of action data a table entry gives it, and its code.
#[derive(Clone)]
pub struct ActionDecl {
    pub name: String,
    pub reads: Vec<FieldId>,
    pub writes: Vec<FieldId>,
    pub registers: Vec<RegisterId>,
    pub data: usize,
    pub run: ActionFn,
}

impl std::fmt::Debug for ActionDecl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ActionDecl")
            .field("name", &self.name)
            .field("reads", &self.reads)
            .field("writes", &self.writes)
            .field("registers", &self.registers)
            .field("data", &self.data)
            .finish()
    }
}

impl ActionDecl {
    pub fn new(name: &str, run: ActionFn) -> Self {
        ActionDecl {
            name: name.into(),
            reads: Vec::new(),
            writes: Vec::new(),
            registers: Vec::new(),
            data: 0,
            run,
        }
    }

    pub fn reads(mut self, fields: &[FieldId]) -> Self {
        self.reads = fields.to_vec();
        self
    }

    pub fn writes(mut self, fields: &[FieldId]) -> Self {
        self.writes = fields.to_vec();
        self
    }

    pub fn registers(mut self, registers: &[RegisterId]) -> Self {
        self.registers = registers.to_vec();
        self
    }

    pub fn data(mut self, words: usize) -> Self {
        self.data = words;
        self
    }
}

/// An exact-match table: a key of fields, the actions an entry may name, a
/// default action for a miss (a keyless table always runs its default).
#[derive(Debug, Clone)]
pub struct TableDecl {
    pub name: String,
    pub key: Vec<FieldId>,
    pub actions: Vec<ActionDecl>,
    /// Index into `actions` run on a miss, with `default_data`.
    pub default_action: usize,
    pub default_data: Vec<u64>,
    /// Most entries the control plane may install.
    pub size: u32,
}

impl TableDecl {
    /// A table without key: every packet runs `action`.
    pub fn keyless(name: &str, action: ActionDecl) -> Self {
        TableDecl {
            name: name.into(),
            key: Vec::new(),
            actions: vec![action],
            default_action: 0,
            default_data: Vec::new(),
            size: 0,
        }
    }

    /// An exact-match table on `key` with room for `size` entries; a miss
    /// runs `actions[default_action]` with `default_data`.
    pub fn exact(
        name: &str,
        key: &[FieldId],
        size: u32,
        actions: Vec<ActionDecl>,
        default_action: usize,
        default_data: &[u64],
    ) -> Self {
        TableDecl {
            name: name.into(),
            key: key.to_vec(),
            actions,
            default_action,
            default_data: default_data.to_vec(),
            size,
        }
    }
}

/// A match-action stage: tables that all see the PHV as it entered the
/// stage; their writes are visible from the next stage on.
#[derive(Debug, Clone)]
pub struct StageDecl {
    pub name: String,
    pub tables: Vec<TableDecl>,
}

impl StageDecl {
    pub fn new(name: &str) -> Self {
        StageDecl {
            name: name.into(),
            tables: Vec::new(),
        }
    }

    pub fn table(mut self, table: TableDecl) -> Self {
        self.tables.push(table);
        self
    }
}

/// Why the parser rejected a packet.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("packet too short: {len} bytes, {need} needed for the {header} header")]
    TooShort {
        header: &'static str,
        len: usize,
        need: usize,
    },
    #[error("bad {header} header: {reason}")]
    Malformed {
        header: &'static str,
        reason: String,
    },
    #[error("the parser wrote field #{field} it did not declare")]
    UndeclaredField { field: usize },
}

/// Where the parser puts what it extracted: only its declared fields.
pub struct ParserOut<'a> {
    pub(crate) phv: &'a mut Phv,
    pub(crate) allowed: &'a [bool],
    /// Width masks by field: a value is truncated as it is set.
    pub(crate) masks: &'a [u64],
    pub(crate) fault: Option<usize>,
}

impl ParserOut<'_> {
    /// Sets a field the parser declared to produce (truncated to its
    /// width); any other field is a fault that rejects the packet.
    pub fn set(&mut self, field: FieldId, value: u64) {
        let i = field.index();
        match (self.allowed.get(i), self.masks.get(i)) {
            (Some(true), Some(&mask)) => self.phv.set(field, value & mask),
            _ => self.fault = Some(i),
        }
    }
}

/// The parser: from the ingress port and bytes, the declared fields, and the
/// length of the headers (the rest is payload).
pub type ParseFn = fn(Port, &[u8], &mut ParserOut<'_>) -> Result<usize, ParseError>;

/// A packet leaving the pipeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Emitted {
    pub port: Port,
    pub bytes: Vec<u8>,
}

/// The deparser: turns the final PHV and the payload into packets.
pub type DeparseFn = fn(&Phv, &[u8], &mut Vec<Emitted>);

/// The parser of a mirrored copy: turns the mirror header fields of the
/// copied PHV into the fields the egress stages read (as the egress parser
/// does for mirrored packets).
pub type MirrorParseFn = fn(&mut Phv);

/// A whole program.
#[derive(Debug, Clone)]
pub struct Program {
    pub name: String,
    pub fields: Vec<FieldDecl>,
    pub registers: Vec<RegisterDecl>,
    pub parser: ParserDecl,
    pub ingress: Vec<StageDecl>,
    pub egress: Vec<StageDecl>,
    pub mirror_parser: Option<MirrorParseFn>,
    pub deparser: DeparserDecl,
}

/// The parser and the fields it produces.
#[derive(Debug, Clone)]
pub struct ParserDecl {
    pub produces: Vec<FieldId>,
    pub run: ParseFn,
}

/// The deparser and the fields it reads.
#[derive(Debug, Clone)]
pub struct DeparserDecl {
    pub reads: Vec<FieldId>,
    pub run: DeparseFn,
}

fn no_output(_: &Phv, _: &[u8], _: &mut Vec<Emitted>) {}

fn no_parse(_: Port, _: &[u8], _: &mut ParserOut<'_>) -> Result<usize, ParseError> {
    Ok(0)
}

/// Builds a [`Program`]: fields and registers first (their ids are needed
/// to declare actions), then parser, stages and deparser.
#[derive(Debug)]
pub struct ProgramBuilder {
    program: Program,
}

impl ProgramBuilder {
    pub fn new(name: &str) -> Self {
        ProgramBuilder {
            program: Program {
                name: name.into(),
                fields: Vec::new(),
                registers: Vec::new(),
                parser: ParserDecl {
                    produces: Vec::new(),
                    run: no_parse,
                },
                ingress: Vec::new(),
                egress: Vec::new(),
                mirror_parser: None,
                deparser: DeparserDecl {
                    reads: Vec::new(),
                    run: no_output,
                },
            },
        }
    }

    /// Declares a PHV field of `bits` bits (1..=64).
    pub fn field(&mut self, name: &str, bits: u8) -> FieldId {
        let id = FieldId(self.program.fields.len() as u16);
        self.program.fields.push(FieldDecl {
            name: name.into(),
            bits,
        });
        id
    }

    /// Declares a register array of `entries` cells of `bytes` bytes (1..=8),
    /// indexed by the value of field `index`.
    pub fn register(&mut self, name: &str, bytes: u8, entries: u32, index: FieldId) -> RegisterId {
        let id = RegisterId(self.program.registers.len() as u16);
        self.program.registers.push(RegisterDecl {
            name: name.into(),
            bytes,
            entries,
            index,
        });
        id
    }

    pub fn parser(&mut self, produces: &[FieldId], run: ParseFn) -> &mut Self {
        self.program.parser = ParserDecl {
            produces: produces.to_vec(),
            run,
        };
        self
    }

    pub fn ingress(&mut self, stage: StageDecl) -> &mut Self {
        self.program.ingress.push(stage);
        self
    }

    pub fn egress(&mut self, stage: StageDecl) -> &mut Self {
        self.program.egress.push(stage);
        self
    }

    pub fn mirror_parser(&mut self, run: MirrorParseFn) -> &mut Self {
        self.program.mirror_parser = Some(run);
        self
    }

    pub fn deparser(&mut self, reads: &[FieldId], run: DeparseFn) -> &mut Self {
        self.program.deparser = DeparserDecl {
            reads: reads.to_vec(),
            run,
        };
        self
    }

    pub fn build(self) -> Program {
        self.program
    }
}
