//! The emulator rejects programs the hardware could not run, naming the
//! stage and the register or field, and runs the ones it accepts handing
//! each action only what it declared.

use rmt::channel::{ChannelConfig, Loss};
use rmt::pipeline::{ControlError, InjectError, TraceEvent};
use rmt::pktgen::{parse_header, GeneratorApp};
use rmt::program::{
    ActionDecl, ActionIo, Emitted, ParseError, ParserOut, Port, StageDecl, TableDecl,
};
use rmt::{FieldId, Phv, Pipeline, PipelineConfig, Program, ProgramBuilder, ProgramError};

/// Two bytes in: `key` and `value`.
fn parse_two(_: Port, bytes: &[u8], out: &mut ParserOut<'_>) -> Result<usize, ParseError> {
    match *bytes {
        [k, v, ..] => {
            out.set(FieldId::from_index(0), u64::from(k));
            out.set(FieldId::from_index(1), u64::from(v));
            Ok(2)
        }
        _ => Err(ParseError::TooShort {
            header: "toy",
            len: bytes.len(),
            need: 2,
        }),
    }
}

fn add(io: &mut ActionIo<'_>) {
    let &[v] = io.reads else { return };
    io.registers[0] += v;
    io.writes[0] = io.registers[0];
}

fn copy(io: &mut ActionIo<'_>) {
    let &[v] = io.reads else { return };
    io.writes[0] = v;
}

fn nothing(_: &mut ActionIo<'_>) {}

/// A toy counter program: fields key (index) and value, a register
/// `total` summed per key; `extra` lets a test append stages.
struct Toy {
    b: ProgramBuilder,
    key: FieldId,
    value: FieldId,
    sum: FieldId,
    total: rmt::program::RegisterId,
}

fn toy() -> Toy {
    let mut b = ProgramBuilder::new("toy");
    let key = b.field("key", 8);
    let value = b.field("value", 8);
    let sum = b.field("sum", 16);
    let total = b.register("total", 2, 4, key);
    b.parser(&[key, value], parse_two);
    Toy {
        b,
        key,
        value,
        sum,
        total,
    }
}

fn adder(t: &Toy, name: &str) -> TableDecl {
    TableDecl::keyless(
        name,
        ActionDecl::new("add", add)
            .reads(&[t.value])
            .writes(&[t.sum])
            .registers(&[t.total]),
    )
}

fn load(p: Program) -> Result<Pipeline, ProgramError> {
    Pipeline::load(p, PipelineConfig::default())
}

#[test]
fn a_register_touched_in_two_stages_is_rejected_naming_both() {
    let mut t = toy();
    let first = adder(&t, "add-a");
    let second = adder(&t, "add-b");
    t.b.egress(StageDecl::new("count").table(first));
    t.b.egress(StageDecl::new("count-again").table(second));
    let err = load(t.b.build()).unwrap_err();
    assert!(
        matches!(err, ProgramError::RegisterInTwoStages { .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "register `total` is touched in egress stage 1 (count) and again in egress stage 2 \
         (count-again): a register lives in one stage's stateful ALU"
    );
}

#[test]
fn a_register_in_ingress_and_egress_is_two_stages() {
    let mut t = toy();
    let first = adder(&t, "add-a");
    let second = adder(&t, "add-b");
    t.b.ingress(StageDecl::new("count").table(first));
    t.b.egress(StageDecl::new("count").table(second));
    let err = load(t.b.build()).unwrap_err().to_string();
    assert!(
        err.contains("ingress stage 1 (count)") && err.contains("egress stage 1 (count)"),
        "{err}"
    );
}

#[test]
fn two_tables_of_one_stage_updating_one_register_are_two_rmws() {
    let mut t = toy();
    let first = adder(&t, "add-a");
    let second = adder(&t, "add-b");
    t.b.egress(StageDecl::new("count").table(first).table(second));
    let err = load(t.b.build()).unwrap_err();
    assert!(matches!(err, ProgramError::DoubleRmw { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "register `total` is read-modify-written twice in one pass in egress stage 1 (count) \
         (by table `add-a` action `add` and table `add-b` action `add`): a stateful ALU updates \
         a cell once per packet"
    );
}

#[test]
fn an_action_naming_a_register_twice_is_two_rmws() {
    let mut t = toy();
    let table = TableDecl::keyless(
        "add",
        ActionDecl::new("add-twice", add)
            .reads(&[t.value])
            .writes(&[t.sum])
            .registers(&[t.total, t.total]),
    );
    t.b.egress(StageDecl::new("count").table(table));
    let err = load(t.b.build()).unwrap_err().to_string();
    assert!(
        err.contains(
            "register `total` is read-modify-written twice in one pass in egress stage 1 (count)"
        ),
        "{err}"
    );
}

#[test]
fn alternative_actions_of_one_table_may_share_a_register() {
    let mut t = toy();
    let table = TableDecl::exact(
        "add-or-not",
        &[t.key],
        4,
        vec![
            ActionDecl::new("add", add)
                .reads(&[t.value])
                .writes(&[t.sum])
                .registers(&[t.total]),
            ActionDecl::new("add-too", add)
                .reads(&[t.value])
                .writes(&[t.sum])
                .registers(&[t.total]),
        ],
        0,
        &[],
    );
    t.b.egress(StageDecl::new("count").table(table));
    assert!(load(t.b.build()).is_ok());
}

#[test]
fn reading_a_field_a_later_stage_produces_is_rejected() {
    let mut t = toy();
    let doubled = t.b.field("doubled", 16);
    let reader = TableDecl::keyless(
        "use",
        ActionDecl::new("copy", copy)
            .reads(&[doubled])
            .writes(&[t.sum]),
    );
    let producer = TableDecl::keyless(
        "make",
        ActionDecl::new("copy", copy)
            .reads(&[t.value])
            .writes(&[doubled]),
    );
    t.b.ingress(StageDecl::new("consume").table(reader));
    t.b.egress(StageDecl::new("produce").table(producer));
    let err = load(t.b.build()).unwrap_err();
    assert!(
        matches!(err, ProgramError::ReadBeforeProduced { .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "ingress stage 1 (consume) reads field `doubled` before it is produced (first by egress \
         stage 1 (produce)): values only move forward through the pipeline"
    );
}

#[test]
fn a_write_is_not_visible_to_another_table_of_the_same_stage() {
    let mut t = toy();
    let doubled = t.b.field("doubled", 16);
    let producer = TableDecl::keyless(
        "make",
        ActionDecl::new("copy", copy)
            .reads(&[t.value])
            .writes(&[doubled]),
    );
    let reader = TableDecl::keyless(
        "use",
        ActionDecl::new("copy", copy)
            .reads(&[doubled])
            .writes(&[t.sum]),
    );
    t.b.egress(StageDecl::new("both").table(producer).table(reader));
    let err = load(t.b.build()).unwrap_err().to_string();
    assert!(err.starts_with("egress stage 1 (both) reads field `doubled` before it is produced (only by this same stage"), "{err}");
}

#[test]
fn a_match_key_and_a_register_index_are_reads_too() {
    let mut t = toy();
    let late = t.b.field("late", 8);
    let reg = t.b.register("by-late", 4, 4, late);
    let table = TableDecl::keyless("count", ActionDecl::new("n", nothing).registers(&[reg]));
    t.b.egress(StageDecl::new("count-late").table(table));
    let err = load(t.b.build()).unwrap_err().to_string();
    assert_eq!(err, "egress stage 1 (count-late) reads field `late` before it is produced (no stage produces it): values only move forward through the pipeline");

    let mut t = toy();
    let late = t.b.field("late", 8);
    let keyed = TableDecl::exact(
        "keyed",
        &[late],
        4,
        vec![ActionDecl::new("n", nothing)],
        0,
        &[],
    );
    t.b.ingress(StageDecl::new("lookup").table(keyed));
    let err = load(t.b.build()).unwrap_err().to_string();
    assert!(
        err.starts_with("ingress stage 1 (lookup) reads field `late`"),
        "{err}"
    );
}

#[test]
fn too_many_stages_and_too_wide_actions_are_rejected() {
    let mut t = toy();
    for i in 0..3 {
        let table = TableDecl::keyless(&format!("t{i}"), ActionDecl::new("n", nothing));
        t.b.egress(StageDecl::new(&format!("s{i}")).table(table));
    }
    let config = PipelineConfig {
        stages: 2,
        ..PipelineConfig::default()
    };
    let err = Pipeline::load(t.b.build(), config).unwrap_err().to_string();
    assert_eq!(err, "egress uses 3 stages; the pipeline has 2");

    let mut t = toy();
    let many: Vec<FieldId> = (0..17).map(|i| t.b.field(&format!("f{i}"), 8)).collect();
    let table = TableDecl::keyless("wide", ActionDecl::new("n", nothing).writes(&many));
    t.b.egress(StageDecl::new("wide").table(table));
    let err = load(t.b.build()).unwrap_err().to_string();
    assert_eq!(
        err,
        "egress stage 1 (wide): action `n` writes fields: 17, at most 16"
    );
}

#[test]
fn a_program_with_more_fields_than_the_phv_holds_is_rejected() {
    let mut t = toy();
    for i in 0..rmt::phv::MAX_FIELDS {
        t.b.field(&format!("f{i}"), 8);
    }
    let err = load(t.b.build()).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "the program declares {} PHV fields; the PHV holds {}",
            rmt::phv::MAX_FIELDS + 3,
            rmt::phv::MAX_FIELDS
        )
    );
}

/// A toy with an exact-match table `keyed` on `key` (room for 2) that
/// copies `value` into `sum`; a miss leaves `sum` 0.
fn keyed_toy() -> Pipeline {
    let mut t = toy();
    let table = TableDecl::exact(
        "keyed",
        &[t.key],
        2,
        vec![
            ActionDecl::new("copy", copy)
                .reads(&[t.value])
                .writes(&[t.sum]),
            ActionDecl::new("n", nothing),
        ],
        1,
        &[],
    );
    t.b.ingress(StageDecl::new("lookup").table(table));
    load(t.b.build()).unwrap()
}

/// `sum` after packet (key, value) ran ingress.
fn sum_after(p: &mut Pipeline, at_ns: u64, key: u8, value: u8) -> u64 {
    p.enable_trace();
    p.inject(at_ns, Port::Mac(0), &[key, value]).unwrap();
    p.run_until_idle(u64::MAX);
    let egress = p.take_trace().into_iter().find_map(|e| match e {
        TraceEvent::Egress { phv, .. } => Some(phv.get(FieldId::from_index(2))),
        _ => None,
    });
    egress.expect("the packet reached egress")
}

#[test]
fn a_deleted_entry_misses_and_frees_its_room() {
    let mut p = keyed_toy();
    p.table_add("keyed", &[1], "copy", &[]).unwrap();
    p.table_add("keyed", &[200], "copy", &[]).unwrap();
    assert_eq!(sum_after(&mut p, 0, 1, 9), 9, "installed: a hit");
    p.table_delete("keyed", &[1]).unwrap();
    assert_eq!(p.table_len("keyed"), Ok(1));
    assert_eq!(sum_after(&mut p, 10, 1, 9), 0, "deleted: a miss");
    assert_eq!(sum_after(&mut p, 20, 200, 4), 4, "the other entry stays");
    p.table_add("keyed", &[3], "copy", &[]).unwrap();
    assert_eq!(sum_after(&mut p, 30, 3, 5), 5, "its room took a new key");
    assert_eq!(
        p.table_delete("keyed", &[1]).unwrap_err().to_string(),
        "table `keyed` has no entry for key [1]"
    );
    assert_eq!(
        p.table_delete("nope", &[1]),
        Err(ControlError::UnknownTable("nope".into()))
    );
    assert!(p.table_delete("keyed", &[1, 2]).is_err());
}

#[test]
fn an_action_sees_only_its_own_fields_and_registers() {
    // Two registers, two stages; each action checks the shape of what it
    // was handed and reports it in a field.
    fn shape(io: &mut ActionIo<'_>) {
        io.writes[0] = (io.reads.len() * 100 + io.registers.len() * 10 + io.data.len()) as u64;
        io.registers[0] = io.reads[0];
    }
    let mut t = toy();
    let other = t.b.register("other", 4, 4, t.key);
    let seen_a = t.b.field("seen-a", 16);
    let seen_b = t.b.field("seen-b", 16);
    let a = TableDecl::keyless(
        "a",
        ActionDecl::new("shape", shape)
            .reads(&[t.value])
            .writes(&[seen_a])
            .registers(&[t.total]),
    );
    let b = TableDecl::exact(
        "b",
        &[t.key],
        4,
        vec![ActionDecl::new("shape", shape)
            .reads(&[t.value, t.key])
            .writes(&[seen_b])
            .registers(&[other])
            .data(3)],
        0,
        &[0, 0, 0],
    );
    t.b.egress(StageDecl::new("a").table(a));
    t.b.egress(StageDecl::new("b").table(b));
    fn emit(phv: &Phv, _: &[u8], out: &mut Vec<Emitted>) {
        let a = phv.get(FieldId::from_index(3));
        let b = phv.get(FieldId::from_index(4));
        out.push(Emitted {
            port: Port::Mac(0),
            bytes: vec![a as u8, b as u8],
        });
    }
    t.b.deparser(&[seen_a, seen_b], emit);
    let mut p = load(t.b.build()).unwrap();
    p.register_write("other", 2, 77).unwrap();
    p.inject(0, Port::Mac(0), &[2, 9]).unwrap();
    p.run_until_idle(1_000);
    let out = p.take_emitted();
    assert_eq!(out[0].bytes, [110, 213]);
    assert_eq!(p.register_read("total", 2).unwrap(), 9);
    assert_eq!(p.register_read("other", 2).unwrap(), 9);
    assert_eq!(p.register_read("total", 1).unwrap(), 0);
}

#[test]
fn registers_and_fields_keep_their_width() {
    fn big(io: &mut ActionIo<'_>) {
        io.registers[0] = 0x1_0000_0005;
        io.writes[0] = 0x1_0003;
    }
    let mut t = toy();
    let table = TableDecl::keyless(
        "big",
        ActionDecl::new("big", big)
            .writes(&[t.sum])
            .registers(&[t.total]),
    );
    t.b.egress(StageDecl::new("big").table(table));
    let mut p = load(t.b.build()).unwrap();
    p.enable_trace();
    p.inject(0, Port::Mac(0), &[1, 1]).unwrap();
    p.run_until_idle(1_000);
    assert_eq!(p.register_read("total", 1).unwrap(), 5, "2-byte register");
    let sum = t.sum;
    let phv = p
        .take_trace()
        .into_iter()
        .find_map(|e| match e {
            TraceEvent::Egress { phv, .. } => Some(phv),
            _ => None,
        })
        .unwrap();
    assert_eq!(phv.get(sum), 3, "16-bit field");
}

#[test]
fn an_out_of_range_register_index_drops_the_packet_and_counts_a_fault() {
    let mut t = toy();
    let table = adder(&t, "add");
    t.b.egress(StageDecl::new("count").table(table));
    let mut p = load(t.b.build()).unwrap();
    p.inject(0, Port::Mac(0), &[200, 1]).unwrap();
    p.run_until_idle(1_000);
    let c = p.counters();
    assert_eq!((c.register_faults, c.egress_dropped), (1, 1));
}

#[test]
fn malformed_input_is_an_error_and_bad_control_calls_say_why() {
    let mut t = toy();
    let table = TableDecl::exact(
        "keyed",
        &[t.key],
        1,
        vec![ActionDecl::new("n", nothing)],
        0,
        &[],
    );
    t.b.ingress(StageDecl::new("lookup").table(table));
    let mut p = load(t.b.build()).unwrap();
    let err = p.inject(0, Port::Mac(0), &[1]).unwrap_err();
    assert!(matches!(
        err,
        InjectError::Parse(ParseError::TooShort { .. })
    ));
    assert_eq!(p.counters().rejected, 1);
    assert_eq!(
        p.register_read("nope", 0),
        Err(ControlError::UnknownRegister("nope".into()))
    );
    assert!(p.register_read("total", 4).is_err());
    p.table_add("keyed", &[1], "n", &[]).unwrap();
    let full = p
        .table_add("keyed", &[2], "n", &[])
        .unwrap_err()
        .to_string();
    assert_eq!(full, "table `keyed`: is full (1 entries)");
    assert!(p.table_add("keyed", &[1, 2], "n", &[]).is_err());
    assert!(p.inject(0, Port::Mac(0), &[1, 1]).is_ok());
    p.advance_to(10);
    assert!(matches!(
        p.inject(5, Port::Mac(0), &[1, 1]),
        Err(InjectError::Control(ControlError::TimeWentBack { .. }))
    ));
}

/// Mirrors every packet; the copy is marked by the mirror parser so it is
/// not mirrored again.
fn mirroring_toy(config: PipelineConfig) -> Pipeline {
    fn mirror(io: &mut ActionIo<'_>) {
        let &[copy] = io.reads else { return };
        io.verdict.mirror = copy == 0;
    }
    fn mark(phv: &mut Phv) {
        phv.set(FieldId::from_index(2), 1);
    }
    fn emit(phv: &Phv, _: &[u8], out: &mut Vec<Emitted>) {
        out.push(Emitted {
            port: Port::Mac(0),
            bytes: vec![
                phv.get(FieldId::from_index(0)) as u8,
                phv.get(FieldId::from_index(2)) as u8,
            ],
        });
    }
    let mut b = ProgramBuilder::new("mirror");
    let key = b.field("key", 8);
    let value = b.field("value", 8);
    let copy = b.field("copy", 1);
    b.parser(&[key, value, copy], parse_two);
    b.egress(StageDecl::new("mirror").table(TableDecl::keyless(
        "m",
        ActionDecl::new("m", mirror).reads(&[copy]),
    )));
    b.mirror_parser(mark);
    b.deparser(&[key, copy], emit);
    Pipeline::load(b.build(), config).unwrap()
}

#[test]
fn mirrors_come_back_after_their_latency_and_a_lossy_path_loses_the_chosen_ones() {
    let config = PipelineConfig {
        mirror: ChannelConfig {
            latency_ns: 100,
            capacity: 8,
            loss: Loss::Nth(vec![2]),
        },
        ..PipelineConfig::default()
    };
    let mut p = mirroring_toy(config);
    for (i, at) in [0u64, 10, 20].into_iter().enumerate() {
        p.inject(at, Port::Mac(0), &[i as u8, 0]).unwrap();
    }
    p.run_until_idle(10_000);
    let out: Vec<Vec<u8>> = p.take_emitted().into_iter().map(|e| e.bytes).collect();
    assert_eq!(
        out,
        [vec![0, 0], vec![1, 0], vec![2, 0], vec![0, 1], vec![2, 1]]
    );
    let c = p.counters();
    assert_eq!(
        (c.mirror.offered, c.mirror.lost_random, c.mirror.delivered),
        (3, 1, 2)
    );
}

#[test]
fn a_full_tm_queue_drops_and_egress_drops_nothing_itself() {
    let config = PipelineConfig {
        tm_queue_capacity: 4,
        egress_slot_ns: 10,
        mirror: ChannelConfig::lossless(5, 0),
        ..PipelineConfig::default()
    };
    let mut p = mirroring_toy(config);
    for i in 0..10u8 {
        p.inject(0, Port::Mac(0), &[i, 0]).unwrap();
    }
    p.run_until_idle(10_000);
    // The first packet goes to egress at once (the slot is free), four wait
    // in the queue, five find it full.
    let c = p.counters();
    assert_eq!((c.tm.enqueued, c.tm.dropped), (5, 5));
    assert_eq!((c.egress_processed, c.egress_dropped, c.emitted), (5, 0, 5));
    assert_eq!(
        c.mirror.lost_full, 5,
        "a mirror path without room loses every copy"
    );
}

#[test]
fn the_generator_fires_batches_on_its_timer() {
    fn parse_gen(port: Port, bytes: &[u8], out: &mut ParserOut<'_>) -> Result<usize, ParseError> {
        let Port::Generator(_) = port else {
            return Err(ParseError::Malformed {
                header: "gen",
                reason: "not generated".into(),
            });
        };
        let (_, batch, packet) = parse_header(bytes).ok_or(ParseError::TooShort {
            header: "gen",
            len: bytes.len(),
            need: 6,
        })?;
        out.set(FieldId::from_index(0), u64::from(packet));
        out.set(FieldId::from_index(1), u64::from(batch));
        Ok(bytes.len())
    }
    let mut t = toy();
    t.b.parser(&[t.key, t.value], parse_gen);
    let table = adder(&t, "add");
    t.b.egress(StageDecl::new("count").table(table));
    let mut p = load(t.b.build()).unwrap();
    p.add_generator(GeneratorApp {
        app: 1,
        start_ns: 100,
        period_ns: 1_000,
        packets: 2,
    });
    p.advance_to(3_500);
    // Batches 0..=3 at 100, 1100, 2100, 3100; each adds its batch number.
    assert_eq!(p.counters().generated, 8);
    assert_eq!(p.register_read("total", 0).unwrap(), 6);
    assert_eq!(p.register_read("total", 1).unwrap(), 6);
    let _ = t.key;
}

#[test]
fn recirculated_packets_parse_again_after_their_latency_and_a_lossy_path_loses_some() {
    // The deparser sends a packet whose first byte is below 3 back in with
    // that byte one higher; from 3 on it leaves at the MAC (as 4).
    fn emit(phv: &Phv, _: &[u8], out: &mut Vec<Emitted>) {
        let pass = phv.get(FieldId::from_index(0)) as u8;
        let port = if pass < 3 {
            Port::Recirculation
        } else {
            Port::Mac(0)
        };
        out.push(Emitted {
            port,
            bytes: vec![pass + 1, phv.get(FieldId::from_index(1)) as u8],
        });
    }
    let run = |loss: Loss| {
        let mut t = toy();
        t.b.deparser(&[t.key, t.value], emit);
        let config = PipelineConfig {
            recirculation: ChannelConfig {
                latency_ns: 750,
                capacity: 8,
                loss,
            },
            ..PipelineConfig::default()
        };
        let mut p = Pipeline::load(t.b.build(), config).unwrap();
        p.enable_trace();
        p.inject(0, Port::Mac(0), &[0, 42]).unwrap();
        p.inject(0, Port::Mac(0), &[1, 43]).unwrap();
        p.run_until_idle(1_000_000);
        let at: Vec<u64> = p
            .take_trace()
            .into_iter()
            .filter_map(|e| match e {
                TraceEvent::Egress { at_ns, .. } => Some(at_ns),
                _ => None,
            })
            .collect();
        (p.take_emitted(), p.counters().recirculation, at)
    };
    let (out, counters, at) = run(Loss::None);
    let out: Vec<Vec<u8>> = out.into_iter().map(|e| e.bytes).collect();
    assert_eq!(out, [vec![4, 43], vec![4, 42]], "after three and two trips");
    assert_eq!((counters.offered, counters.delivered), (5, 5));
    // Egress passes at 0 and 1 ns, then one 750 ns trip per pass.
    assert_eq!(at, [0, 1, 750, 751, 1500, 1501, 2250]);
    let (out, counters, _) = run(Loss::Nth(vec![2]));
    assert_eq!(
        out.len(),
        1,
        "the packet whose recirculation was lost is gone"
    );
    assert_eq!(counters.lost_random, 1);
}
