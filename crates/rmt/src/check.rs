//! The load-time rules of the RMT architecture (thesis §5.1.1, §5.1.2).
//!
//! - A register lives in one stage's stateful ALU: every action that touches
//!   it sits in that one stage.
//! - It is read-modify-written at most once per pass: two tables of a stage
//!   both run on every packet, so two of them touching one register (or an
//!   action naming it twice) would need two RMWs in one pass.
//! - Values only move forward: a stage reads a PHV field (as a match key, an
//!   action input or a register index) only if the parser or an earlier
//!   stage produces it. Tables of one stage run in parallel on the PHV as it
//!   entered the stage, so a write in the same stage is too late.
//!
//! Plus the shape limits of a stage: how many stages, how wide an action's
//! inputs, outputs and state may be.

use crate::phv::{FieldId, MAX_FIELDS};
use crate::program::{ActionDecl, Gress, Program, StageDecl};

/// Most fields an action reads (a stage's input crossbar is finite).
pub const MAX_READS: usize = 16;
/// Most fields an action writes.
pub const MAX_WRITES: usize = 16;
/// Most registers an action read-modify-writes.
pub const MAX_REGISTERS: usize = 4;
/// Most fields in a match key.
pub const MAX_KEY: usize = 6;

/// A program the hardware could not run, named by stage, table and the
/// register or field at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProgramError {
    #[error("register `{register}` is touched in {first} and again in {second}: a register lives in one stage's stateful ALU")]
    RegisterInTwoStages {
        register: String,
        first: String,
        second: String,
    },
    #[error("register `{register}` is read-modify-written twice in one pass in {stage} (by {first} and {second}): a stateful ALU updates a cell once per packet")]
    DoubleRmw {
        register: String,
        stage: String,
        first: String,
        second: String,
    },
    #[error("{stage} reads field `{field}` before it is produced ({produced}): values only move forward through the pipeline")]
    ReadBeforeProduced {
        stage: String,
        field: String,
        produced: String,
    },
    #[error("{gress} uses {used} stages; the pipeline has {limit}")]
    TooManyStages {
        gress: Gress,
        used: usize,
        limit: usize,
    },
    #[error("the program declares {declared} PHV fields; the PHV holds {limit}")]
    TooManyFields { declared: usize, limit: usize },
    #[error("{stage}: action `{action}` {what} {count}, at most {limit}")]
    ActionTooWide {
        stage: String,
        action: String,
        what: &'static str,
        count: usize,
        limit: usize,
    },
    #[error("{stage}: table `{table}` {reason}")]
    BadTable {
        stage: String,
        table: String,
        reason: String,
    },
    #[error("{place} names field #{index}, which the program does not declare")]
    UnknownField { place: String, index: usize },
    #[error("{place} names register #{index}, which the program does not declare")]
    UnknownRegister { place: String, index: usize },
    #[error("{what} `{name}` is declared twice")]
    DuplicateName { what: &'static str, name: String },
    #[error("{what} `{name}`: {reason}")]
    BadDeclaration {
        what: &'static str,
        name: String,
        reason: String,
    },
}

/// A stage as error messages name it: `egress stage 2 (rx-avail)`.
pub fn stage_label(gress: Gress, index: usize, stage: &StageDecl) -> String {
    format!("{gress} stage {} ({})", index + 1, stage.name)
}

/// Checks every rule; the first violation found is the error.
pub fn check(program: &Program, stage_limit: usize) -> Result<(), ProgramError> {
    check_declarations(program)?;
    for (gress, stages) in [
        (Gress::Ingress, &program.ingress),
        (Gress::Egress, &program.egress),
    ] {
        if stages.len() > stage_limit {
            return Err(ProgramError::TooManyStages {
                gress,
                used: stages.len(),
                limit: stage_limit,
            });
        }
    }
    check_shapes(program)?;
    check_register_placement(program)?;
    check_dataflow(program)
}

fn check_declarations(program: &Program) -> Result<(), ProgramError> {
    if program.fields.len() > MAX_FIELDS {
        return Err(ProgramError::TooManyFields {
            declared: program.fields.len(),
            limit: MAX_FIELDS,
        });
    }
    let mut names = std::collections::HashSet::new();
    for f in &program.fields {
        if !(1..=64).contains(&f.bits) {
            return Err(ProgramError::BadDeclaration {
                what: "field",
                name: f.name.clone(),
                reason: format!("{} bits; a field has 1 to 64", f.bits),
            });
        }
        if !names.insert(("field", f.name.as_str())) {
            return Err(ProgramError::DuplicateName {
                what: "field",
                name: f.name.clone(),
            });
        }
    }
    for r in &program.registers {
        if !(1..=8).contains(&r.bytes) || r.entries == 0 {
            return Err(ProgramError::BadDeclaration {
                what: "register",
                name: r.name.clone(),
                reason: format!(
                    "{} cells of {} bytes; a register has cells of 1 to 8 bytes, at least one",
                    r.entries, r.bytes
                ),
            });
        }
        field_exists(program, r.index, &format!("register `{}`", r.name))?;
        if !names.insert(("register", r.name.as_str())) {
            return Err(ProgramError::DuplicateName {
                what: "register",
                name: r.name.clone(),
            });
        }
    }
    for f in &program.parser.produces {
        field_exists(program, *f, "the parser")?;
    }
    for f in &program.deparser.reads {
        field_exists(program, *f, "the deparser")?;
    }
    Ok(())
}

fn field_exists(program: &Program, f: FieldId, place: &str) -> Result<(), ProgramError> {
    if f.index() < program.fields.len() {
        Ok(())
    } else {
        Err(ProgramError::UnknownField {
            place: place.into(),
            index: f.index(),
        })
    }
}

fn stages(program: &Program) -> impl Iterator<Item = (String, &StageDecl)> {
    let ingress = program.ingress.iter().enumerate();
    let egress = program.egress.iter().enumerate();
    ingress
        .map(|(i, s)| (stage_label(Gress::Ingress, i, s), s))
        .chain(egress.map(|(i, s)| (stage_label(Gress::Egress, i, s), s)))
}

fn check_shapes(program: &Program) -> Result<(), ProgramError> {
    for (label, stage) in stages(program) {
        let mut table_names = std::collections::HashSet::new();
        for table in &stage.tables {
            let bad = |reason: String| ProgramError::BadTable {
                stage: label.clone(),
                table: table.name.clone(),
                reason,
            };
            if !table_names.insert(table.name.as_str()) {
                return Err(bad("is declared twice in this stage".into()));
            }
            if table.actions.is_empty() {
                return Err(bad("has no action".into()));
            }
            if table.key.len() > MAX_KEY {
                return Err(bad(format!(
                    "has a key of {} fields, at most {MAX_KEY}",
                    table.key.len()
                )));
            }
            let Some(default) = table.actions.get(table.default_action) else {
                return Err(bad(format!(
                    "names default action #{} of {}",
                    table.default_action,
                    table.actions.len()
                )));
            };
            if table.default_data.len() != default.data {
                return Err(bad(format!(
                    "gives its default action `{}` {} data words, it takes {}",
                    default.name,
                    table.default_data.len(),
                    default.data
                )));
            }
            for f in &table.key {
                field_exists(program, *f, &format!("{label} table `{}`", table.name))?;
            }
            for action in &table.actions {
                check_action_shape(program, &label, action)?;
            }
        }
    }
    Ok(())
}

fn check_action_shape(
    program: &Program,
    label: &str,
    action: &ActionDecl,
) -> Result<(), ProgramError> {
    let place = format!("{label} action `{}`", action.name);
    for f in action.reads.iter().chain(&action.writes) {
        field_exists(program, *f, &place)?;
    }
    for r in &action.registers {
        if r.index() >= program.registers.len() {
            return Err(ProgramError::UnknownRegister {
                place,
                index: r.index(),
            });
        }
    }
    for (what, count, limit) in [
        ("reads fields:", action.reads.len(), MAX_READS),
        ("writes fields:", action.writes.len(), MAX_WRITES),
        ("updates registers:", action.registers.len(), MAX_REGISTERS),
    ] {
        if count > limit {
            return Err(ProgramError::ActionTooWide {
                stage: label.into(),
                action: action.name.clone(),
                what,
                count,
                limit,
            });
        }
    }
    Ok(())
}

/// One register, one stage, one RMW per pass.
fn check_register_placement(program: &Program) -> Result<(), ProgramError> {
    let mut home: Vec<Option<String>> = vec![None; program.registers.len()];
    for (label, stage) in stages(program) {
        // Which table of this stage touches each register (a table's actions
        // are alternatives: one of them runs per packet).
        let mut user: Vec<Option<(usize, String)>> = vec![None; program.registers.len()];
        for (t, table) in stage.tables.iter().enumerate() {
            for action in &table.actions {
                let mut seen = std::collections::HashSet::new();
                for r in &action.registers {
                    let register = program.registers[r.index()].name.clone();
                    let who = format!("table `{}` action `{}`", table.name, action.name);
                    if !seen.insert(*r) {
                        return Err(ProgramError::DoubleRmw {
                            register,
                            stage: label.clone(),
                            first: who.clone(),
                            second: who,
                        });
                    }
                    match &user[r.index()] {
                        Some((first_table, first)) if *first_table != t => {
                            return Err(ProgramError::DoubleRmw {
                                register,
                                stage: label.clone(),
                                first: first.clone(),
                                second: who,
                            });
                        }
                        Some(_) => {}
                        None => user[r.index()] = Some((t, who)),
                    }
                    match &home[r.index()] {
                        Some(first) if *first != label => {
                            return Err(ProgramError::RegisterInTwoStages {
                                register,
                                first: first.clone(),
                                second: label.clone(),
                            });
                        }
                        Some(_) => {}
                        None => home[r.index()] = Some(label.clone()),
                    }
                }
            }
        }
    }
    Ok(())
}

/// Every field a stage reads is produced by the parser or an earlier stage.
fn check_dataflow(program: &Program) -> Result<(), ProgramError> {
    // available[f]: the parser or a stage before the current one writes f.
    let n = program.fields.len();
    let mut available = vec![false; n];
    for f in &program.parser.produces {
        available[f.index()] = true;
    }
    let all: Vec<(String, &StageDecl)> = stages(program).collect();
    for (position, (label, stage)) in all.iter().enumerate() {
        for table in &stage.tables {
            let registers = table
                .actions
                .iter()
                .flat_map(|a| &a.registers)
                .map(|r| program.registers[r.index()].index);
            let reads = table
                .key
                .iter()
                .copied()
                .chain(table.actions.iter().flat_map(|a| a.reads.iter().copied()))
                .chain(registers);
            for f in reads {
                if !available[f.index()] {
                    return Err(ProgramError::ReadBeforeProduced {
                        stage: label.clone(),
                        field: program.fields[f.index()].name.clone(),
                        produced: producer_of(&all, f, position),
                    });
                }
            }
        }
        for f in writes_of(stage) {
            available[f.index()] = true;
        }
    }
    for f in &program.deparser.reads {
        if !available[f.index()] {
            return Err(ProgramError::ReadBeforeProduced {
                stage: "the deparser".into(),
                field: program.fields[f.index()].name.clone(),
                produced: "no stage produces it".into(),
            });
        }
    }
    Ok(())
}

fn writes_of(stage: &StageDecl) -> impl Iterator<Item = FieldId> + '_ {
    stage
        .tables
        .iter()
        .flat_map(|t| &t.actions)
        .flat_map(|a| a.writes.iter().copied())
}

/// Says where `f` is produced, for a stage at `position` that read it too
/// early.
fn producer_of(all: &[(String, &StageDecl)], f: FieldId, position: usize) -> String {
    match all
        .iter()
        .enumerate()
        .find(|(_, (_, s))| writes_of(s).any(|w| w == f))
    {
        Some((p, _)) if p == position => {
            "only by this same stage, whose writes are visible from the next stage on".into()
        }
        Some((_, (label, _))) => format!("first by {label}"),
        None => "no stage produces it".into(),
    }
}
