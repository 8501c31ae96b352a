//! A loaded program's stages and how one packet runs them: each table
//! looks up its key, its action gets exactly the fields, data and register
//! cells it declared, and the stage's writes land when all its tables ran.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::check::{MAX_KEY, MAX_READS, MAX_REGISTERS, MAX_WRITES};
use crate::phv::Phv;
use crate::program::{ActionFn, ActionIo, Program, StageDecl, Verdict};

pub(crate) struct CompiledAction {
    pub(crate) reads: Vec<usize>,
    pub(crate) writes: Vec<usize>,
    /// (register, field holding the cell index)
    pub(crate) registers: Vec<(usize, usize)>,
    pub(crate) data: usize,
    pub(crate) name: String,
    pub(crate) run: ActionFn,
}

pub(crate) type Key = [u64; MAX_KEY];

pub(crate) struct CompiledTable {
    pub(crate) name: String,
    pub(crate) key: Vec<usize>,
    pub(crate) actions: Vec<CompiledAction>,
    pub(crate) default_action: usize,
    pub(crate) default_data: Vec<u64>,
    pub(crate) size: usize,
    pub(crate) entries: HashMap<Key, (usize, Vec<u64>), BuildHasherDefault<FxHasher>>,
}

pub(crate) struct CompiledStage {
    pub(crate) tables: Vec<CompiledTable>,
}

pub(crate) fn compile_stage(program: &Program, stage: &StageDecl) -> CompiledStage {
    let tables = stage
        .tables
        .iter()
        .map(|t| CompiledTable {
            name: t.name.clone(),
            key: t.key.iter().map(|f| f.index()).collect(),
            actions: t
                .actions
                .iter()
                .map(|a| CompiledAction {
                    reads: a.reads.iter().map(|f| f.index()).collect(),
                    writes: a.writes.iter().map(|f| f.index()).collect(),
                    registers: a
                        .registers
                        .iter()
                        .map(|r| (r.index(), program.registers[r.index()].index.index()))
                        .collect(),
                    data: a.data,
                    name: a.name.clone(),
                    run: a.run,
                })
                .collect(),
            default_action: t.default_action,
            default_data: t.default_data.clone(),
            size: t.size as usize,
            entries: HashMap::default(),
        })
        .collect();
    CompiledStage { tables }
}

/// Reused buffers of one stage run: what an action reads, writes and
/// updates (sized by the load-time limits), and the writes the stage lands
/// at its end.
pub(crate) struct Scratch {
    reads: [u64; MAX_READS],
    writes: [u64; MAX_WRITES],
    values: [u64; MAX_REGISTERS],
    cells: [(usize, usize); MAX_REGISTERS],
    pending: Vec<(usize, u64)>,
}

impl Default for Scratch {
    fn default() -> Self {
        Scratch {
            reads: [0; MAX_READS],
            writes: [0; MAX_WRITES],
            values: [0; MAX_REGISTERS],
            cells: [(0, 0); MAX_REGISTERS],
            pending: Vec::new(),
        }
    }
}

/// Runs `stages` on one packet. Every table of a stage sees the PHV as it
/// entered the stage; the stage's writes land after all its tables ran.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_stages(
    stages: &[CompiledStage],
    registers: &mut [Vec<u64>],
    register_masks: &[u64],
    field_masks: &[u64],
    phv: &mut Phv,
    verdict: &mut Verdict,
    scratch: &mut Scratch,
    faults: &mut u64,
) {
    for stage in stages {
        let single = stage.tables.len() == 1;
        scratch.pending.clear();
        for table in &stage.tables {
            let (a, data) = lookup(table, phv);
            let action = &table.actions[a];
            let (nr, nw, nc) = (
                action.reads.len(),
                action.writes.len(),
                action.registers.len(),
            );
            for (slot, f) in scratch.reads.iter_mut().zip(&action.reads) {
                *slot = phv.raw(*f);
            }
            for (slot, f) in scratch.writes.iter_mut().zip(&action.writes) {
                *slot = phv.raw(*f);
            }
            let mut in_range = true;
            for (i, (r, index_field)) in action.registers.iter().enumerate() {
                let index = phv.raw(*index_field) as usize;
                match registers[*r].get(index) {
                    Some(v) => {
                        scratch.cells[i] = (*r, index);
                        scratch.values[i] = *v;
                    }
                    None => in_range = false,
                }
            }
            if !in_range {
                verdict.drop = true;
                *faults += 1;
                continue;
            }
            (action.run)(&mut ActionIo {
                reads: &scratch.reads[..nr],
                data,
                writes: &mut scratch.writes[..nw],
                registers: &mut scratch.values[..nc],
                verdict,
            });
            for ((r, index), v) in scratch.cells[..nc].iter().zip(&scratch.values) {
                registers[*r][*index] = v & register_masks[*r];
            }
            for (f, v) in action.writes.iter().zip(&scratch.writes) {
                if single {
                    // No other table of the stage can read the stage's input.
                    phv.set_raw(*f, *v, field_masks[*f]);
                } else {
                    scratch.pending.push((*f, *v));
                }
            }
        }
        for (f, v) in scratch.pending.drain(..) {
            phv.set_raw(f, v, field_masks[f]);
        }
    }
}

fn lookup<'t>(table: &'t CompiledTable, phv: &Phv) -> (usize, &'t [u64]) {
    if !table.key.is_empty() {
        let mut key = [0u64; MAX_KEY];
        for (slot, f) in key.iter_mut().zip(&table.key) {
            *slot = phv.raw(*f);
        }
        if let Some((a, data)) = table.entries.get(&key) {
            return (*a, data);
        }
    }
    (table.default_action, &table.default_data)
}

/// FxHash (rustc's hasher): match keys are a few integers, hashed on every
/// packet, and need no protection against chosen collisions here.
#[derive(Default)]
pub(crate) struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            let mut word = [0u8; 8];
            word.copy_from_slice(w);
            self.write_u64(u64::from_ne_bytes(word));
        }
        for b in words.remainder() {
            self.write_u64(u64::from(*b));
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}
