//! The DCTCP senders of `exp ooo`: this kernel has no `dctcp` module, so
//! the clients are connections of a toe endpoint of their own in the
//! sender's namespace, running the data path's DCTCP (RFC 8257,
//! [`toe::cc::Dctcp`]): ECN negotiated on the SYN, the wire marking CE
//! past its threshold K, the receiving toe endpoint echoing it as ECN-Echo,
//! the sender's window cut by alpha / 2 once per window with marks.
//!
//! Every client of the Linux run is a slot here, with the same plan of
//! flows (the same request sizes and pauses from the same seed): a flow
//! connects, sends the length and the request, reads the 16-byte reply,
//! then reads to the server's FIN before it closes (so the client is the
//! passive closer and keeps no TIME_WAIT state; the server closes right
//! after its reply). The FCT is taken from `connect` to the whole reply,
//! as for the Linux clients. One thread runs the endpoint and every slot.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use toe::stages::ConnIdx;
use toe::{Endpoint, ToeError};

use super::{expected_reply, toe_err, FlowPlan, Flows, OooParams, FLOW_LIMIT, REPLY_LEN};
use crate::ExpError;

/// One flow in progress.
struct Open {
    conn: ConnIdx,
    start: Instant,
    /// The length header and the request.
    message: Vec<u8>,
    sent: usize,
    reply: [u8; REPLY_LEN],
    got: usize,
    want: [u8; REPLY_LEN],
    /// The FCT, once the whole reply is in; then the slot reads to EOF.
    fct_ms: Option<f64>,
}

enum Slot {
    /// Between flows, until the instant.
    Pausing(Instant),
    Flow(Box<Open>),
    /// `until` passed and the last flow ended.
    Done,
}

/// What one step of a flow did.
enum Progress {
    Busy,
    Idle,
    /// The flow ended: its FCT if the reply matched and the server closed.
    Ended(Option<f64>),
}

/// Runs every client of `params` on `ep` against `to` until `until` (a
/// flow started before it runs to its end), on a thread of its own pinned
/// to the clients' CPU (as the Linux clients are; the caller's thread keeps its
/// affinity, and so do the threads it starts later); each flow's kind and
/// FCT (None: failed or wrong reply), and the endpoint's counters.
pub(super) fn run_clients(
    mut ep: Endpoint,
    params: &OooParams,
    rep: u32,
    to: SocketAddr,
    until: Instant,
) -> Result<(Flows, toe::Counters), ExpError> {
    let params = params.clone();
    std::thread::spawn(move || {
        crate::cpus::pin(super::CLIENT_CPU);
        clients(&mut ep, &params, rep, to, until).map(|flows| (flows, ep.counters()))
    })
    .join()
    .map_err(|_| ExpError::Parameter("the DCTCP client thread panicked".into()))?
}

fn clients(
    ep: &mut Endpoint,
    params: &OooParams,
    rep: u32,
    to: SocketAddr,
    until: Instant,
) -> Result<Flows, ExpError> {
    let mut plans = FlowPlan::for_clients(params, rep);
    let mut slots: Vec<Slot> = plans
        .iter()
        .map(|_| Slot::Pausing(Instant::now()))
        .collect();
    let mut flows = Vec::new();
    let mut buf = vec![0u8; 1 << 12];
    loop {
        let mut busy = ep.poll().map_err(toe_err)? > 0;
        let now = Instant::now();
        for (slot, plan) in slots.iter_mut().zip(plans.iter_mut()) {
            match slot {
                Slot::Pausing(_) if now >= until => *slot = Slot::Done,
                Slot::Pausing(at) if now >= *at => {
                    let open = start(ep, to, plan.next_body())?;
                    *slot = Slot::Flow(Box::new(open));
                    busy = true;
                }
                Slot::Pausing(_) | Slot::Done => {}
                Slot::Flow(open) => match step(ep, open, &mut buf) {
                    Progress::Busy => busy = true,
                    Progress::Idle => {}
                    Progress::Ended(fct) => {
                        let _ = ep.close(open.conn);
                        flows.push((plan.kind, fct));
                        *slot = Slot::Pausing(Instant::now() + plan.pause());
                        busy = true;
                    }
                },
            }
        }
        if slots.iter().all(|s| matches!(s, Slot::Done)) {
            return Ok(flows);
        }
        if !busy {
            ep.wait(Duration::from_micros(100)).map_err(toe_err)?;
        }
    }
}

fn start(ep: &mut Endpoint, to: SocketAddr, body: Vec<u8>) -> Result<Open, ExpError> {
    let start = Instant::now();
    let want = expected_reply(&body);
    let mut message = (body.len() as u64).to_be_bytes().to_vec();
    message.extend_from_slice(&body);
    let conn = ep.connect(to).map_err(toe_err)?;
    Ok(Open {
        conn,
        start,
        message,
        sent: 0,
        reply: [0; REPLY_LEN],
        got: 0,
        want,
        fct_ms: None,
    })
}

/// Sends what the flow has left to send, reads what came; a flow past
/// [`FLOW_LIMIT`], refused, reset or closed early ends without an FCT.
fn step(ep: &mut Endpoint, f: &mut Open, buf: &mut [u8]) -> Progress {
    if f.start.elapsed() > FLOW_LIMIT {
        return Progress::Ended(None);
    }
    let mut busy = false;
    if f.sent < f.message.len() {
        match ep.send(f.conn, &f.message[f.sent..]) {
            Ok(n) => {
                f.sent += n;
                busy |= n > 0;
            }
            Err(ToeError::WouldBlock) => {}
            Err(_) => return Progress::Ended(None),
        }
    }
    loop {
        // The reply's bytes go to `reply`; anything after it would be a
        // wrong reply, read into `buf` only to be refused.
        let into: &mut [u8] = if f.got < REPLY_LEN {
            &mut f.reply[f.got..]
        } else {
            &mut *buf
        };
        match ep.recv(f.conn, into) {
            Ok(0) => {
                return Progress::Ended(f.fct_ms.filter(|_| f.got == REPLY_LEN));
            }
            Ok(n) => {
                f.got += n;
                busy = true;
                if f.got == REPLY_LEN && f.fct_ms.is_none() {
                    let fct = f.start.elapsed().as_secs_f64() * 1e3;
                    f.fct_ms = (f.reply == f.want).then_some(fct);
                    if f.fct_ms.is_none() {
                        return Progress::Ended(None);
                    }
                } else if f.got > REPLY_LEN {
                    return Progress::Ended(None);
                }
            }
            Err(ToeError::WouldBlock) => break,
            Err(_) => return Progress::Ended(None),
        }
    }
    if busy {
        Progress::Busy
    } else {
        Progress::Idle
    }
}
