//! `steer demo`.

use exp::demo::{DemoParams, DemoResult, Repetition, Way};

use crate::cli::DemoArgs;
use crate::{exit, output};

pub fn run(args: DemoArgs, json: bool) -> anyhow::Result<i32> {
    let params = args.common.sized(args.params, DemoParams::quick);
    let progress = output::progress(json);
    output::note!(
        "demo: {} TCP flows ({}) to a receiver with {} software-RSS queues; {} repetitions per way",
        params.flows,
        if params.processes {
            format!("{} iperf3 processes", params.flows)
        } else {
            format!("iperf3 -P {}", params.flows)
        },
        params.queues,
        params.repetitions
    );
    let result = exp::demo::run(&params, |way, rep| progress(&progress_line(way, rep)))?;
    args.common.finish(json, &result, print_summary)?;
    Ok(exit::OK)
}

fn progress_line(way: Way, rep: &Repetition) -> String {
    let shared: Vec<String> = rep
        .flows_per_queue
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 1)
        .map(|(q, n)| format!("q{q}:{n}"))
        .collect();
    format!(
        "  {:<7} rep {:>2}: max {} flows on a queue, {} ({:.1} Gbit/s){}",
        way.name(),
        rep.repetition,
        rep.max_flows_on_a_queue,
        if rep.perfect { "perfect" } else { "collisions" },
        rep.aggregate_gbps,
        if shared.is_empty() {
            String::new()
        } else {
            format!("; shared: {}", shared.join(" "))
        }
    )
}

fn print_summary(result: &DemoResult) -> anyhow::Result<()> {
    let ideal = result.params.ideal_max();
    for way in &result.ways {
        println!("\nway: {} ({})", way.name, way.description);
        output::table_of(
            &[
                "rep",
                "queues with 0/1/2/3+ flows",
                "max on a queue",
                "perfect",
                "Gbit/s",
                "slowest flow",
                "cpu busy",
            ],
            way.runs.iter(),
            |r| {
                vec![
                    r.repetition.to_string(),
                    histogram(&r.flows_per_queue),
                    r.max_flows_on_a_queue.to_string(),
                    if r.perfect { "yes" } else { "no" }.into(),
                    format!("{:.2}", r.aggregate_gbps),
                    format!("{:.2}", r.min_flow_gbps),
                    r.cpu_busy
                        .iter()
                        .map(|b| output::or_na(*b, |b| format!("{:.0}%", b * 100.0)))
                        .collect::<Vec<_>>()
                        .join(" "),
                ]
            },
        )?;
    }
    println!(
        "\nsummary (perfect: no queue carries more than {ideal} flow(s); measured on the datapath)"
    );
    output::table_of(
        &["way", "perfect", "worst max on a queue", "mean Gbit/s"],
        result.ways.iter(),
        |w| {
            vec![
                w.name.to_string(),
                format!("{:.0}%", w.perfect_fraction * 100.0),
                w.max_flows_on_a_queue.to_string(),
                format!("{:.2}", w.aggregate_gbps),
            ]
        },
    )?;
    println!(
        "theory for random ports: perfect with probability {:.2}%",
        result.theory.perfect_probability * 100.0
    );
    Ok(())
}

/// "a/b/c/d": how many queues hold 0, 1, 2, and 3 or more flows.
fn histogram(flows_per_queue: &[u32]) -> String {
    let [a, b, c, d] = exp::demo::queue_histogram(flows_per_queue);
    format!("{a}/{b}/{c}/{d}")
}
