//! `steer rmt`: the match-action pipeline emulator and Laminar's transport
//! on it (crate `rmt`, docs/rmt.md).

use clap::{Args, Subcommand};
use rmt::laminar::example::{table_5_1, Row};
use rmt::report::ProgramReport;
use serde::Serialize;

use crate::output;

#[derive(Debug, Subcommand)]
pub enum RmtCommand {
    /// Worked examples of the thesis, computed by running Laminar's program
    /// on the emulator (never a table typed in).
    #[command(subcommand)]
    Example(ExampleCommand),
    /// Stages and state of each program, in the style of Table 5.2: stages
    /// used per half of the pipeline, register bytes per stage, per
    /// connection and in total.
    ///
    /// Example: steer rmt report --connections 32768
    Report(ReportArgs),
}

#[derive(Debug, Subcommand)]
pub enum ExampleCommand {
    /// Table 5.1 (§5.3.1.5): seven segments of one connection, the pseudo
    /// segments that merge its out-of-order interval, the lost P#3; the
    /// reassembly registers after every packet.
    #[command(name = "table-5.1")]
    Table51,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Connections the programs are sized for (every register and table
    /// has this many cells; the thesis's Tofino2 build holds 32K).
    #[arg(long, default_value_t = 32768, value_parser = clap::value_parser!(u32).range(1..))]
    pub connections: u32,
}

#[derive(Serialize)]
struct Rows {
    rows: Vec<Row>,
}

#[derive(Serialize)]
struct Reports {
    programs: Vec<ProgramReport>,
}

pub fn run(cmd: RmtCommand, json: bool) -> anyhow::Result<i32> {
    match cmd {
        RmtCommand::Example(ExampleCommand::Table51) => {
            let rows = Rows { rows: table_5_1()? };
            if json {
                output::json(&rows)?;
            } else {
                print_rows(&rows.rows)?;
            }
        }
        RmtCommand::Report(args) => {
            let reports = Reports {
                programs: rmt::report::laminar_reports(args.connections),
            };
            if json {
                output::json(&reports)?;
            } else {
                for r in &reports.programs {
                    print_report(r)?;
                }
            }
        }
    }
    Ok(crate::exit::OK)
}

fn print_rows(rows: &[Row]) -> anyhow::Result<()> {
    let n = |v: Option<u32>| output::or_na(v, |v| v.to_string());
    output::table_of(
        &[
            "segment",
            "seq",
            "plen",
            "rx-next-seq",
            "rx-avail",
            "rx-ooo-tail",
            "rx-ooo-head",
            "",
        ],
        rows.iter(),
        |r| {
            let lost = r.seq.is_some() && r.rx_next_seq.is_none();
            vec![
                r.segment.clone(),
                n(r.seq),
                n(r.plen),
                n(r.rx_next_seq),
                n(r.rx_avail),
                n(r.rx_ooo_tail),
                n(r.rx_ooo_head),
                if lost { "lost on the mirror path" } else { "" }.into(),
            ]
        },
    )
}

fn print_report(r: &ProgramReport) -> anyhow::Result<()> {
    println!("{}", r.program);
    output::rows(&[
        (
            "stages",
            format!(
                "ingress {}/{}, egress {}/{}",
                r.ingress_stages, r.stage_limit, r.egress_stages, r.stage_limit
            ),
        ),
        (
            "state per connection",
            format!("{} bytes", r.state_bytes_per_connection),
        ),
        ("state in total", format!("{} bytes", r.state_bytes)),
        (
            "PHV",
            format!("{} fields, {} bits", r.phv_fields, r.phv_bits),
        ),
        (
            "match tables",
            format!(
                "{} entries, {} key bytes",
                r.table_entries, r.table_key_bytes
            ),
        ),
    ])?;
    output::table_of(
        &[
            "stage",
            "name",
            "tables",
            "registers",
            "bytes/connection",
            "bytes",
        ],
        r.stages.iter(),
        |s| {
            let registers: Vec<&str> = s.registers.iter().map(|g| g.name.as_str()).collect();
            vec![
                format!("{} {}", s.gress, s.number),
                s.name.clone(),
                s.tables.join(", "),
                registers.join(", "),
                s.state_bytes_per_connection.to_string(),
                s.state_bytes.to_string(),
            ]
        },
    )?;
    println!();
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command};

    #[test]
    fn table_5_1_json_has_a_row_per_packet_and_null_state_for_the_lost_p3() {
        let rows = Rows {
            rows: table_5_1().unwrap(),
        };
        let json = serde_json::to_value(&rows).unwrap();
        let rows = json["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 13);
        let p3 = rows.iter().find(|r| r["segment"] == "P#3").unwrap();
        assert_eq!(
            (p3["seq"].as_u64(), p3["plen"].as_u64()),
            (Some(1500), Some(1000))
        );
        for key in ["rx_next_seq", "rx_avail", "rx_ooo_tail", "rx_ooo_head"] {
            assert!(p3[key].is_null(), "{key} of the lost P#3");
        }
        let last = &rows[12];
        assert_eq!(last["segment"], "P#6");
        assert_eq!(last["rx_next_seq"], 2600);
    }

    #[test]
    fn bad_arguments_are_usage_errors() {
        for argv in [
            &["steer", "rmt", "report", "--connections", "0"][..],
            &["steer", "rmt", "example", "table-5.2"],
            &["steer", "rmt", "report", "--connections", "many"],
        ] {
            let err = Cli::try_parse_from(argv).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{argv:?}");
        }
        let ok = Cli::try_parse_from(["steer", "rmt", "example", "table-5.1", "--json"]).unwrap();
        assert!(ok.json);
        assert!(matches!(
            ok.command,
            Command::Rmt(RmtCommand::Example(ExampleCommand::Table51))
        ));
    }
}
