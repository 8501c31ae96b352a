//! Laminar's control plane (§5.4 "SwitchConf"): installs connections into
//! the tables and registers, and handles what the data path hands up:
//! rolling back an out-of-window segment (§5.3.1.2) and resetting a
//! connection that acknowledged data never sent (§5.3.2.3).

use serde::Serialize;

use crate::pipeline::{ControlError, Pipeline};

use super::fields::{ACK_OOW, CONN, RX_OOW, RX_PRE_AVAIL, RX_PRE_NEXT, WORKFLOW};
use super::program::{oow, register, table, workflow, FROZEN};

/// One established connection, as the control plane sets it up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ConnectionSpec {
    pub local_ip: u32,
    pub local_port: u16,
    pub remote_ip: u32,
    pub remote_port: u16,
    /// The libTOE context (DMA channel) that owns it.
    pub ctx: u8,
    /// The next sequence number expected from the peer; it lands at the
    /// start of the receive buffer.
    pub rx_next_seq: u32,
    pub rx_buffer_addr: u64,
    /// A power of two, so sequence numbers wrap onto the buffer evenly.
    pub rx_buffer_size: u32,
    /// The initial receive window.
    pub rx_avail: u32,
    /// The sequence number of offset 0 of the transmit buffer.
    pub tx_base_seq: u32,
    pub tx_next_ack: u32,
    pub tx_credits: u32,
    /// Credits each generator SYNC grants (the rate, set by congestion
    /// control, §5.3.2.1).
    pub credit_grant: u32,
    /// The peer's window, already scaled.
    pub tx_remote_avail: u32,
    pub wscale: u8,
}

/// Installs connection `conn`: its 4-tuple, its translation and headers,
/// and the initial value of every register.
pub fn install(p: &mut Pipeline, conn: u16, spec: &ConnectionSpec) -> Result<(), ControlError> {
    if !spec.rx_buffer_size.is_power_of_two() || spec.rx_avail > spec.rx_buffer_size {
        return Err(ControlError::BadEntry {
            table: table::TRANSLATION.into(),
            reason: format!(
                "a receive buffer of {} bytes with a window of {}: the size must be a power of two and hold the window",
                spec.rx_buffer_size, spec.rx_avail
            ),
        });
    }
    let c = u64::from(conn);
    p.table_add(
        table::CONNECTIONS,
        &[
            u64::from(spec.remote_ip),
            u64::from(spec.local_ip),
            u64::from(spec.remote_port),
            u64::from(spec.local_port),
        ],
        "rx-connection",
        &[c],
    )?;
    p.table_add(
        table::TRANSLATION,
        &[c],
        "translate",
        &[
            u64::from(spec.rx_next_seq),
            spec.rx_buffer_addr,
            u64::from(spec.rx_buffer_size),
            u64::from(spec.tx_base_seq),
        ],
    )?;
    set_headers(p, conn, spec)?;
    let i = usize::from(conn);
    for (name, value) in [
        (register::RX_NEXT_SEQ, u64::from(spec.rx_next_seq)),
        (register::RX_AVAIL, u64::from(spec.rx_avail)),
        (register::RX_OOO_TAIL, 0),
        (register::RX_OOO_HEAD, 0),
        (register::TX_NEXT_ACK, u64::from(spec.tx_next_ack)),
        (register::TX_DUPACK_CNT, 0),
        (register::TX_AVAIL, 0),
        (register::TX_CREDITS, u64::from(spec.tx_credits)),
        (register::TX_REMOTE_AVAIL, u64::from(spec.tx_remote_avail)),
    ] {
        p.register_write(name, i, value)?;
    }
    Ok(())
}

/// Writes connection `conn`'s prebuilt headers and its credit grant (the
/// `headers` table entry); run again with a new `credit_grant`, it is how
/// congestion control sets the rate the generator's SYNCs grant
/// (§5.3.2.1). Registers are left as they are.
pub fn set_headers(p: &mut Pipeline, conn: u16, spec: &ConnectionSpec) -> Result<(), ControlError> {
    p.table_add(
        table::HEADERS,
        &[u64::from(conn)],
        "prebuild",
        &[
            u64::from(spec.local_ip),
            u64::from(spec.remote_ip),
            u64::from(spec.local_port),
            u64::from(spec.remote_port),
            u64::from(spec.ctx),
            u64::from(spec.wscale),
            u64::from(spec.credit_grant),
        ],
    )
}

/// Removes connection `conn` when it closes: deletes its entries from the
/// connection, translation and header tables, so its segments miss from
/// now on and its slot can take a new connection. The 4-tuple comes from
/// the connection's header entry, as a switch control plane reads back
/// what it installed. Its registers keep their last values until
/// [`install`] writes the next connection's.
pub fn remove(p: &mut Pipeline, conn: u16) -> Result<(), ControlError> {
    let c = u64::from(conn);
    let headers = p.table_read(table::HEADERS, &[c])?;
    let Some((_, &[local_ip, remote_ip, local_port, remote_port, ..])) = headers else {
        return Err(ControlError::NoEntry {
            table: table::HEADERS.into(),
            key: vec![c],
        });
    };
    p.table_delete(
        table::CONNECTIONS,
        &[remote_ip, local_ip, remote_port, local_port],
    )?;
    p.table_delete(table::TRANSLATION, &[c])?;
    p.table_delete(table::HEADERS, &[c])
}

/// What the control plane did so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ControlPlane {
    /// Out-of-window segments rolled back.
    pub rollbacks: u64,
    /// Connections reset for acknowledging data never sent.
    pub ack_resets: u64,
    /// SYN, FIN or RST segments handed up (connection management).
    pub exceptions: u64,
}

impl ControlPlane {
    /// Handles every digest the pipeline sent so far.
    pub fn handle(&mut self, p: &mut Pipeline) -> Result<(), ControlError> {
        for digest in p.take_digests() {
            let phv = &digest.phv;
            let conn = phv.get(CONN) as usize;
            if phv.get(WORKFLOW) == workflow::EXCEPTION {
                self.exceptions += 1;
            } else if phv.get(RX_OOW) == oow::ROLLBACK {
                self.roll_back(p, conn, phv.get(RX_PRE_NEXT), phv.get(RX_PRE_AVAIL))?;
            } else if phv.get(ACK_OOW) == 1 {
                self.ack_resets += 1;
            }
        }
        Ok(())
    }

    /// Restores the receive state from before the out-of-window segment
    /// (§5.3.1.2). Segments that came in meanwhile were all dropped as out
    /// of window; window the host granted meanwhile is kept.
    fn roll_back(
        &mut self,
        p: &mut Pipeline,
        conn: usize,
        next: u64,
        avail: u64,
    ) -> Result<(), ControlError> {
        let granted_meanwhile = p.register_read(register::RX_AVAIL, conn)? & !FROZEN;
        p.register_write(register::RX_NEXT_SEQ, conn, next)?;
        p.register_write(
            register::RX_AVAIL,
            conn,
            (avail + granted_meanwhile).min(FROZEN - 1),
        )?;
        self.rollbacks += 1;
        Ok(())
    }
}
