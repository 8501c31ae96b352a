//! A loaded program's stages, compiled at load time into a flat plan, and
//! how one packet runs them: each table looks up its key, its action gets
//! exactly the fields, data and register cells it declared, and the stage's
//! writes land when all its tables ran.
//!
//! The plan holds PHV positions, register cell ranges and width masks
//! resolved from the declaration, so a packet pays no name lookups, no
//! allocation and no bounds check per field (see [`Phv::raw`]).

use crate::check::{MAX_READS, MAX_REGISTERS, MAX_WRITES};
use crate::phv::{FieldId, FieldMasks, Phv};
use crate::program::{ActionFn, ActionIo, Program, StageDecl, Verdict};
use crate::register::RegisterFile;
use crate::table::{Entries, Entry};

/// A register an action read-modify-writes: its cells in the register
/// file, and the PHV field holding the cell this packet touches.
#[derive(Debug, Clone, Copy, Default)]
struct RegisterPort {
    base: usize,
    entries: usize,
    mask: u64,
    index_field: usize,
}

/// PHV positions of an action's reads or writes, in declared order, held
/// inline so that running the action touches one or two cache lines.
#[derive(Debug, Clone, Copy)]
struct Fields<const N: usize> {
    at: [u8; N],
    len: u8,
}

impl<const N: usize> Fields<N> {
    /// `fields` (at most `N`, each below [`crate::phv::MAX_FIELDS`]: the loader checked
    /// both).
    fn new(fields: &[FieldId]) -> Self {
        let mut at = [0; N];
        for (slot, f) in at.iter_mut().zip(fields) {
            *slot = f.index() as u8;
        }
        Fields {
            at,
            len: fields.len().min(N) as u8,
        }
    }

    #[inline(always)]
    fn as_slice(&self) -> &[u8] {
        &self.at[..usize::from(self.len)]
    }
}

/// An action's registers, in declared order, inline like its fields.
#[derive(Debug, Clone, Copy)]
struct Ports {
    at: [RegisterPort; MAX_REGISTERS],
    len: u8,
}

impl Ports {
    #[inline(always)]
    fn as_slice(&self) -> &[RegisterPort] {
        &self.at[..usize::from(self.len)]
    }
}

pub(crate) struct CompiledAction {
    pub(crate) name: String,
    pub(crate) data: usize,
    reads: Fields<MAX_READS>,
    writes: Fields<MAX_WRITES>,
    registers: Ports,
    run: ActionFn,
}

pub(crate) struct CompiledTable {
    pub(crate) name: String,
    pub(crate) actions: Vec<CompiledAction>,
    pub(crate) entries: Entries,
    default: Entry,
}

pub(crate) struct CompiledStage {
    pub(crate) tables: Vec<CompiledTable>,
}

pub(crate) fn compile_stage(
    program: &Program,
    registers: &RegisterFile,
    stage: &StageDecl,
) -> CompiledStage {
    let action = |a: &crate::program::ActionDecl| CompiledAction {
        name: a.name.clone(),
        data: a.data,
        reads: Fields::new(&a.reads),
        writes: Fields::new(&a.writes),
        registers: {
            let mut at = [RegisterPort::default(); MAX_REGISTERS];
            for (port, r) in at.iter_mut().zip(&a.registers) {
                let layout = registers.layout(r.index());
                *port = RegisterPort {
                    base: layout.base,
                    entries: layout.entries,
                    mask: layout.mask,
                    index_field: program.registers[r.index()].index.index(),
                };
            }
            Ports {
                at,
                len: a.registers.len().min(MAX_REGISTERS) as u8,
            }
        },
        run: a.run,
    };
    let tables = stage
        .tables
        .iter()
        .map(|t| CompiledTable {
            name: t.name.clone(),
            actions: t.actions.iter().map(action).collect(),
            entries: Entries::new(t.key.iter().map(|f| f.index()).collect(), t.size as usize),
            default: Entry {
                action: t.default_action,
                data: t.default_data.clone().into(),
            },
        })
        .collect();
    CompiledStage { tables }
}

/// Reused buffers of one stage run: what an action reads, writes and
/// updates (sized by the load-time limits), and the writes a stage of
/// several tables lands at its end.
pub(crate) struct Scratch {
    reads: [u64; MAX_READS],
    writes: [u64; MAX_WRITES],
    values: [u64; MAX_REGISTERS],
    cells: [usize; MAX_REGISTERS],
    pending: Vec<(usize, u64)>,
}

impl Default for Scratch {
    fn default() -> Self {
        Scratch {
            reads: [0; MAX_READS],
            writes: [0; MAX_WRITES],
            values: [0; MAX_REGISTERS],
            cells: [0; MAX_REGISTERS],
            pending: Vec::new(),
        }
    }
}

/// What one run of the stages touches besides the packet.
pub(crate) struct StageState<'a> {
    pub(crate) registers: &'a mut RegisterFile,
    /// Every field's width mask, by PHV position.
    pub(crate) masks: &'a FieldMasks,
    pub(crate) scratch: &'a mut Scratch,
    /// Actions skipped for an out-of-range register index.
    pub(crate) faults: &'a mut u64,
}

/// Runs `stages` on one packet. Every table of a stage sees the PHV as it
/// entered the stage; the stage's writes land after all its tables ran.
pub(crate) fn run_stages(
    stages: &[CompiledStage],
    state: &mut StageState<'_>,
    phv: &mut Phv,
    verdict: &mut Verdict,
) {
    for stage in stages {
        if let [table] = &stage.tables[..] {
            // No other table of the stage can read the stage's input, so
            // the writes land at once.
            if let Some(writes) = run_table(table, state, phv, verdict) {
                for (f, v) in writes.iter().zip(&state.scratch.writes) {
                    let f = usize::from(*f);
                    phv.set_raw(f, *v, state.masks.of(f));
                }
            }
            continue;
        }
        state.scratch.pending.clear();
        for table in &stage.tables {
            if let Some(writes) = run_table(table, state, phv, verdict) {
                let scratch = &mut *state.scratch;
                for (f, v) in writes.iter().zip(&scratch.writes) {
                    let f = usize::from(*f);
                    scratch.pending.push((f, *v & state.masks.of(f)));
                }
            }
        }
        for (f, v) in state.scratch.pending.drain(..) {
            phv.set_raw(f, v, u64::MAX);
        }
    }
}

/// Looks up the packet's entry in `table` and runs its action on the
/// declared inputs; the values it wrote are left in
/// `state.scratch.writes`, for the fields returned. `None` if the action was
/// skipped (a register index out of range: the packet is dropped).
#[inline(always)]
fn run_table<'t>(
    table: &'t CompiledTable,
    state: &mut StageState<'_>,
    phv: &Phv,
    verdict: &mut Verdict,
) -> Option<&'t [u8]> {
    let entry = table.entries.matching(phv).unwrap_or(&table.default);
    let action = &table.actions[entry.action];
    let scratch = &mut *state.scratch;
    let (reads, writes) = (action.reads.as_slice(), action.writes.as_slice());
    for (slot, f) in scratch.reads.iter_mut().zip(reads) {
        *slot = phv.raw(usize::from(*f));
    }
    for (slot, f) in scratch.writes.iter_mut().zip(writes) {
        *slot = phv.raw(usize::from(*f));
    }
    let ports = scratch.cells.iter_mut().zip(scratch.values.iter_mut());
    let registers = action.registers.as_slice();
    for ((cell, value), port) in ports.zip(registers) {
        let index = phv.raw(port.index_field);
        if index >= port.entries as u64 {
            verdict.drop = true;
            *state.faults += 1;
            return None;
        }
        *cell = port.base + index as usize;
        *value = state.registers.cell(*cell);
    }
    let (nr, nw, nc) = (reads.len(), writes.len(), registers.len());
    (action.run)(&mut ActionIo {
        reads: &scratch.reads[..nr],
        data: &entry.data,
        writes: &mut scratch.writes[..nw],
        registers: &mut scratch.values[..nc],
        verdict,
    });
    for ((cell, value), port) in scratch.cells.iter().zip(&scratch.values).zip(registers) {
        state.registers.set_cell(*cell, value & port.mask);
    }
    Some(writes)
}
