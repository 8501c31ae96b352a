//! `steer demo`.

use std::io::IsTerminal;

use exp::demo::{DemoParams, DemoResult, Repetition};

use crate::cli::DemoArgs;
use crate::output;

pub fn run(args: DemoArgs, json: bool) -> anyhow::Result<i32> {
    let params = DemoParams {
        flows: args.flows,
        queues: args.queues,
        repetitions: if args.quick { 3 } else { args.repetitions },
        seconds: args.seconds,
        lab: "steer-demo".into(),
        keep_lab: args.keep_lab,
    };
    let show_progress = !json || std::io::stderr().is_terminal();
    eprintln!(
        "demo: {} TCP flows (iperf3 -P {}) to a receiver with {} software-RSS queues, {} repetitions",
        params.flows, params.flows, params.queues, params.repetitions
    );
    let result = exp::demo::run(&params, |rep| {
        if show_progress {
            eprintln!("{}", progress_line(rep));
        }
    })?;
    if let Some(path) = &args.output {
        std::fs::write(path, serde_json::to_string_pretty(&result)?)?;
    }
    if json {
        output::json(&result)?;
    } else {
        print_summary(&result)?;
    }
    Ok(0)
}

fn progress_line(rep: &Repetition) -> String {
    let busy: Vec<String> = rep
        .flows_per_queue
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 1)
        .map(|(q, n)| format!("q{q}:{n}"))
        .collect();
    format!(
        "  repetition {:>2}: max {} flows on a queue, {} ({:.1} Gbit/s){}",
        rep.repetition,
        rep.max_flows_on_a_queue,
        if rep.collision_free {
            "collision-free"
        } else {
            "collisions"
        },
        rep.goodput_gbps,
        if busy.is_empty() {
            String::new()
        } else {
            format!("; shared: {}", busy.join(" "))
        }
    )
}

fn print_summary(result: &DemoResult) -> anyhow::Result<()> {
    println!();
    for way in &result.ways {
        println!("way: {} (kernel-chosen source ports)", way.name);
        let body: Vec<Vec<String>> = way
            .runs
            .iter()
            .map(|r| {
                vec![
                    r.repetition.to_string(),
                    histogram(&r.flows_per_queue),
                    r.max_flows_on_a_queue.to_string(),
                    if r.collision_free { "yes" } else { "no" }.into(),
                ]
            })
            .collect();
        output::table(
            &[
                "rep",
                "queues holding 0/1/2/3+ flows",
                "max flows on a queue",
                "collision-free",
            ],
            &body,
        )?;
        println!(
            "collision-free in {:.0}% of repetitions (measured); theory for random ports: {:.2}%",
            way.perfect_fraction * 100.0,
            result.theory.perfect_probability * 100.0
        );
    }
    Ok(())
}

/// "a/b/c/d": how many queues hold 0, 1, 2, and 3 or more flows.
fn histogram(flows_per_queue: &[u32]) -> String {
    let mut counts = [0u32; 4];
    for &n in flows_per_queue {
        counts[(n as usize).min(3)] += 1;
    }
    format!("{}/{}/{}/{}", counts[0], counts[1], counts[2], counts[3])
}
