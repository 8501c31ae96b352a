//! What a program uses of the pipeline, in the style of the thesis's Table
//! 5.2: stages per half against the hardware's, and the stateful memory
//! (registers) per stage, per connection and in total, plus the PHV and the
//! match tables. Counted from the declaration the emulator checks and runs.

use plot::text::{Present, Rows, Table, Text};
use serde::Serialize;

use crate::laminar::{program, LaminarConfig};
use crate::program::{Gress, Program, StageDecl};

/// One register of a stage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RegisterUse {
    pub name: String,
    /// Bytes of one cell (one connection's state).
    pub bytes: u32,
    pub cells: u32,
}

/// One stage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StageUse {
    pub gress: Gress,
    /// 1-based, as the thesis numbers stages.
    pub number: usize,
    pub name: String,
    pub tables: Vec<String>,
    pub registers: Vec<RegisterUse>,
    /// State bytes per cell index (per connection) in this stage.
    pub state_bytes_per_connection: u64,
    pub state_bytes: u64,
}

/// A whole program.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProgramReport {
    pub program: String,
    pub stage_limit: usize,
    pub ingress_stages: usize,
    pub egress_stages: usize,
    pub stages: Vec<StageUse>,
    /// Stateful bytes one connection (one register cell index) occupies.
    pub state_bytes_per_connection: u64,
    /// Stateful bytes of all register cells.
    pub state_bytes: u64,
    pub phv_fields: usize,
    pub phv_bits: u64,
    /// Exact-match entries the tables can hold, and their key bytes.
    pub table_entries: u64,
    pub table_key_bytes: u64,
}

/// How a program reads: its name, its totals, a table of its stages, and
/// an empty line that ends it.
impl Present for ProgramReport {
    fn text(&self) -> Text {
        let limit = self.stage_limit;
        let totals = Rows::new()
            .row(
                "stages",
                format!(
                    "ingress {}/{limit}, egress {}/{limit}",
                    self.ingress_stages, self.egress_stages
                ),
            )
            .row(
                "state per connection",
                format!("{} bytes", self.state_bytes_per_connection),
            )
            .row("state in total", format!("{} bytes", self.state_bytes))
            .row(
                "PHV",
                format!("{} fields, {} bits", self.phv_fields, self.phv_bits),
            )
            .row(
                "match tables",
                format!(
                    "{} entries, {} key bytes",
                    self.table_entries, self.table_key_bytes
                ),
            );
        let header = [
            "stage",
            "name",
            "tables",
            "registers",
            "bytes/connection",
            "bytes",
        ];
        let stages = Table::of(&header, &self.stages, |s| {
            let registers: Vec<&str> = s.registers.iter().map(|g| g.name.as_str()).collect();
            vec![
                format!("{} {}", s.gress, s.number),
                s.name.clone(),
                s.tables.join(", "),
                registers.join(", "),
                s.state_bytes_per_connection.to_string(),
                s.state_bytes.to_string(),
            ]
        });
        Text::new()
            .line(&self.program)
            .rows(totals)
            .table(stages)
            .blank()
    }
}

/// Every report of `steer rmt report`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reports {
    pub programs: Vec<ProgramReport>,
}

impl Present for Reports {
    fn text(&self) -> Text {
        self.programs
            .iter()
            .fold(Text::new(), |text, r| text.then(r.text()))
    }
}

/// Laminar's program sized for `connections`, without and with SACK, on the
/// default pipeline: what `steer rmt report` shows.
pub fn laminar_reports(connections: u32) -> Vec<ProgramReport> {
    let stages = crate::PipelineConfig::default().stages;
    [false, true]
        .into_iter()
        .map(|sack| report(&program(LaminarConfig { connections, sack }), stages))
        .collect()
}

/// Counts what `program` uses on a pipeline of `stage_limit` stages per half.
pub fn report(program: &Program, stage_limit: usize) -> ProgramReport {
    let stage = |gress, i: usize, s: &StageDecl| {
        let mut ids: Vec<_> = s
            .tables
            .iter()
            .flat_map(|t| &t.actions)
            .flat_map(|a| a.registers.iter().copied())
            .collect();
        ids.sort();
        ids.dedup();
        let registers: Vec<RegisterUse> = ids
            .iter()
            .filter_map(|r| program.registers.get(r.index()))
            .map(|r| RegisterUse {
                name: r.name.clone(),
                bytes: u32::from(r.bytes),
                cells: r.entries,
            })
            .collect();
        StageUse {
            gress,
            number: i + 1,
            name: s.name.clone(),
            tables: s.tables.iter().map(|t| t.name.clone()).collect(),
            state_bytes_per_connection: registers.iter().map(|r| u64::from(r.bytes)).sum(),
            state_bytes: registers
                .iter()
                .map(|r| u64::from(r.bytes) * u64::from(r.cells))
                .sum(),
            registers,
        }
    };
    let stages: Vec<StageUse> = (program.ingress.iter().enumerate())
        .map(|(i, s)| stage(Gress::Ingress, i, s))
        .chain(
            program
                .egress
                .iter()
                .enumerate()
                .map(|(i, s)| stage(Gress::Egress, i, s)),
        )
        .collect();
    let tables = || {
        program
            .ingress
            .iter()
            .chain(&program.egress)
            .flat_map(|s| &s.tables)
    };
    let key_bytes = |key: &[crate::FieldId]| -> u64 {
        key.iter()
            .filter_map(|f| program.fields.get(f.index()))
            .map(|f| u64::from(f.bits).div_ceil(8))
            .sum()
    };
    ProgramReport {
        program: program.name.clone(),
        stage_limit,
        ingress_stages: program.ingress.len(),
        egress_stages: program.egress.len(),
        state_bytes_per_connection: stages.iter().map(|s| s.state_bytes_per_connection).sum(),
        state_bytes: stages.iter().map(|s| s.state_bytes).sum(),
        stages,
        phv_fields: program.fields.len(),
        phv_bits: program.fields.iter().map(|f| u64::from(f.bits)).sum(),
        table_entries: tables().map(|t| u64::from(t.size)).sum(),
        table_key_bytes: tables()
            .map(|t| u64::from(t.size) * key_bytes(&t.key))
            .sum(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn laminar_keeps_its_state_in_nine_egress_stages_33_bytes_a_connection() {
        let r = report(
            &program(LaminarConfig {
                connections: 32768,
                sack: false,
            }),
            20,
        );
        assert_eq!((r.ingress_stages, r.egress_stages), (4, 9));
        assert!(r
            .stages
            .iter()
            .filter(|s| s.gress == Gress::Ingress)
            .all(|s| s.registers.is_empty()));
        // Four bytes per register but one for the duplicate-ACK count.
        assert_eq!(r.state_bytes_per_connection, 8 * 4 + 1);
        assert_eq!(r.state_bytes, 33 * 32768);
        let egress: Vec<u64> = r
            .stages
            .iter()
            .filter(|s| s.gress == Gress::Egress)
            .map(|s| s.state_bytes_per_connection)
            .collect();
        assert_eq!(egress, [4, 4, 4, 4, 4, 1, 4, 4, 4]);
    }

    #[test]
    fn a_report_reads_as_its_totals_then_its_stages() {
        let reports = Reports {
            programs: laminar_reports(1024),
        };
        let text = reports.text().to_string();
        let one = reports.programs[0].text().to_string();
        assert!(text.starts_with(&one) && text.len() > one.len());
        let lines: Vec<&str> = one.lines().collect();
        assert_eq!(lines[0], reports.programs[0].program);
        assert!(
            lines[1].starts_with("stages                ingress "),
            "{one}"
        );
        assert!(lines[6].starts_with("stage"), "{one}");
        assert!(lines[6].ends_with("bytes/connection  bytes"), "{one}");
        assert!(one.ends_with("\n\n"), "a blank line ends each program");
        assert_eq!(
            lines.len(),
            1 + 5 + 1 + reports.programs[0].stages.len() + 1
        );
    }

    #[test]
    fn laminar_reports_are_the_program_without_then_with_sack() {
        let reports = laminar_reports(1024);
        assert_eq!(reports.len(), 2);
        let stages = crate::PipelineConfig::default().stages;
        for (r, sack) in reports.iter().zip([false, true]) {
            let alone = report(
                &program(LaminarConfig {
                    connections: 1024,
                    sack,
                }),
                stages,
            );
            assert_eq!(*r, alone);
        }
        assert_ne!(reports[0].program, reports[1].program);
    }
}
