//! The baselines every figure is compared with, measured in the same run with the same sender
//! ([`Generator`]) and the same receiver bookkeeping ([`Recorder`]) as the engine, so they
//! differ from it only in how a tuple gets from one to the other:
//!
//! - **direct call** (against fused): one thread, a plain loop handing each tuple by reference
//!   to an `#[inline(never)]` sink function; the cost of the least a fused hop can be.
//! - **crossbeam channel** (against threaded, for throughput and latency alike): a
//!   `crossbeam_channel::bounded(4096)` carrying the same tuple type between two threads pinned
//!   to cores 0 and 1 (when there are two cores), or one channel per receiver for a fan-out; for latency the sender paces at the same rate
//!   and one-way latency is measured exactly as for the engine. The receiver polls with
//!   `try_recv` and waits with the idle strategy the runtime would use, so both sides wait the
//!   same way; where `park` would sleep on a doorbell, it blocks in crossbeam's own
//!   `recv_timeout` (crossbeam parks the thread and the sender unparks it).

use std::hint::black_box;
use std::time::Duration;

use crossbeam_channel::TryRecvError;
use sluice_graph::OperatorReport;
use sluice_sync::IdleStrategy;
use sluice_types::monotonic_ns;

use crate::foundation::load::{Generator, Load, Span};
use crate::foundation::payload::Payload;
use crate::foundation::record::Recorder;

/// The baseline channel's capacity: the same as a threaded port's default.
pub(crate) const CHANNEL_CAPACITY: usize = 4096;

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The sink of the direct-call baseline: a real call the compiler may not inline.
#[inline(never)]
fn direct_sink<P: Payload, R: Recorder>(recorder: &mut R, tuple: &P) {
    recorder.record(tuple);
}

/// Sends and receives in this thread through [`direct_sink`] for `warmup + duration` (or
/// longer, see [`Span`]).
pub(crate) fn direct_call<P: Payload, R: Recorder>(
    template: P,
    load: Load,
    warmup: Duration,
    duration: Duration,
    idle: Option<IdleStrategy>,
) -> OperatorReport {
    let mut recorder = R::new(monotonic_ns().saturating_add(nanos(warmup)));
    let mut generator = Generator::new(template, load, Span { warmup, duration });
    let mut idle = idle
        .unwrap_or(IdleStrategy::default_for(1, cores()))
        .waiter();
    loop {
        let sent = generator
            .fill(|tuple| {
                // black_box: the tuple is materialised, as the engine's emit does.
                direct_sink(&mut recorder, &black_box(tuple.clone()));
                Ok::<(), std::convert::Infallible>(())
            })
            .unwrap_or_else(|never| match never {});
        if generator.done() {
            break;
        }
        idle.after(sent);
    }
    recorder.report()
}

/// What the channel baseline returns.
pub(crate) struct ChannelRun {
    /// Each receiver's report.
    pub(crate) receivers: Vec<OperatorReport>,
    /// Whether the threads were pinned (sender on core 0, receivers on core 1).
    pub(crate) pinned: bool,
}

/// Sends from a thread on core 0 to `receivers` threads on core 1 (every tuple to each)
/// through bounded crossbeam channels for `warmup + duration`; the receivers drain their
/// channels after the sender stops. The threads are pinned when there is a core for each, as
/// the planner pins the engine's.
pub(crate) fn channel<P: Payload, R: Recorder>(
    receivers: usize,
    template: P,
    load: Load,
    warmup: Duration,
    duration: Duration,
    idle: Option<IdleStrategy>,
) -> anyhow::Result<ChannelRun> {
    let cores = cores();
    let pinned = cores > receivers;
    let pin = move |core: usize| {
        if pinned {
            core_affinity::set_for_current(core_affinity::CoreId { id: core });
        }
    };
    let idle = idle.unwrap_or(IdleStrategy::default_for(1 + receivers, cores));
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..receivers.max(1))
        .map(|_| crossbeam_channel::bounded::<P>(CHANNEL_CAPACITY))
        .unzip();
    let measure_from = monotonic_ns().saturating_add(nanos(warmup));
    std::thread::scope(|s| {
        let sender = s.spawn(move || {
            pin(0);
            let mut generator = Generator::new(template, load, Span { warmup, duration });
            let mut idle = idle.waiter();
            let send_all = |tuple: &P| txs.iter().try_for_each(|tx| tx.send(tuple.clone()));
            while let Ok(sent) = generator.fill(send_all) {
                if generator.done() {
                    break;
                }
                idle.after(sent);
            }
            // Dropping the senders here ends each receiver's loop once it has drained its
            // channel.
        });
        let receivers: Vec<_> = rxs
            .into_iter()
            .enumerate()
            .map(|(i, rx)| {
                s.spawn(move || {
                    pin(1 + i);
                    let mut recorder = R::new(measure_from);
                    let mut idle = idle.waiter();
                    loop {
                        match rx.try_recv() {
                            Ok(tuple) => {
                                recorder.record(&tuple);
                                idle.after(1);
                            }
                            Err(TryRecvError::Empty) => idle.wait_or_park(|timeout| {
                                if let Ok(tuple) = rx.recv_timeout(timeout) {
                                    recorder.record(&tuple);
                                }
                                true
                            }),
                            Err(TryRecvError::Disconnected) => break,
                        }
                    }
                    recorder.report()
                })
            })
            .collect();
        let sent = sender.join();
        let received: Result<Vec<_>, _> = receivers.into_iter().map(|r| r.join()).collect();
        match (sent, received) {
            (Ok(()), Ok(receivers)) => Ok(ChannelRun { receivers, pinned }),
            _ => Err(anyhow::anyhow!(
                "a thread of the crossbeam baseline panicked"
            )),
        }
    })
}
