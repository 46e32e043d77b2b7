//! The parts the Storm benchmark topologies ([`crate::sol`], [`crate::throughput_test`])
//! share: their tuple, a spout of pre-generated random messages at a rate, the bolt that passes
//! a tuple on, and the terminal bolt that measures each tuple's end-to-end latency and checks
//! that every tuple the spout sent arrived exactly once with its payload intact.
//!
//! A [`StormTuple`] carries its sequence number, the spout's send time
//! ([`sluice_types::monotonic_ns`]) and a payload. As in Storm's spouts the payloads are made
//! once, at the start, from a seed ([`MessagePool`]); the spout sends message
//! [`MessagePool::index`]`(seq)` with tuple `seq`, so the terminal bolt, which builds the same
//! pool from the same settings, knows the payload every tuple must carry without trusting the
//! tuple. Within a process the payload is shared by reference (an `Arc`, as a JVM passes a
//! tuple's values), across processes it is copied: a tuple is 16 bytes of header and its
//! payload.
//!
//! The terminal bolt ([`Check`]) counts, per instance, the tuples that arrived, those whose
//! payload differs ([`CORRUPT`]), sequence numbers seen twice ([`DUPLICATES`]) and the sum of
//! the distinct ones modulo 2^32 ([`SEQ_SUM`]); [`Integrity::of`] sets them against what the
//! spout sent. Duplicates are found in a window of the last [`SEQ_WINDOW`] sequence numbers
//! (512 KiB of bits): a tuple older than that, which bounded queues never hold back, counts as
//! [`LATE`] and fails the check. Each tuple's latency, arrival minus send time, goes into the
//! operator's histogram, the job's end-to-end latency.
//!
//! The spout stamps a tuple just before it emits it, so a tuple's latency is the time it spent
//! in the topology, never time spent waiting for the spout to be allowed to send: when the
//! topology cannot keep up, the bounded queues fill, the spout's emits wait (backpressure) and
//! it falls behind its rate, which [`SENT`] over [`SENDING_NS`] shows.

use std::ops::RangeInclusive;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sluice_graph::{
    expect_tuple, histogram_from_pairs, histogram_pairs, latency_histogram, GraphBuilder,
    GraphError, LatencyHistogram, Operator, OperatorContext, OperatorError, OperatorHandle,
    OperatorReport, Output, Partitioning, Ports, Produced, Snapshot, Source,
};
use sluice_ops::Pacer;
use sluice_runtime::JobReport;
use sluice_types::{monotonic_ns, DecodeError, EncodeError, Encoding, Tuple, TupleRef};

use crate::{latency_line, throughput_line, AppConfig, AppError};

/// The spout's name in both topologies.
pub const SPOUT: &str = "spout";
/// The spout's counter of tuples sent.
pub const SENT: &str = "sent";
/// The spout's counter of nanoseconds from its first chance to send to its last tuple sent.
pub const SENDING_NS: &str = "sending_ns";
/// The terminal bolt's counter of tuples whose payload is not the one sent.
pub const CORRUPT: &str = "corrupt";
/// The terminal bolt's counter of sequence numbers that arrived again.
pub const DUPLICATES: &str = "duplicates";
/// The terminal bolt's counter of distinct sequence numbers that arrived.
pub const DISTINCT: &str = "distinct";
/// The terminal bolt's counter of tuples older than its window of sequence numbers.
pub const LATE: &str = "late";
/// The terminal bolt's counter of tuples it received. Kept in its state, so that a job
/// restarted from a checkpoint counts the tuples received before it too (the runtime's count
/// of the tuples in covers the last run from the checkpoint only).
pub const RECEIVED: &str = "received";
/// The terminal bolt's counter: the sum of the distinct sequence numbers, modulo 2^32 per
/// instance (so that summing the instances' counters cannot overflow).
pub const SEQ_SUM: &str = "seq_sum";

/// The most instances of each bolt (`--set parallelism`).
pub const MAX_PARALLELISM: usize = 64;
/// The largest payload (`--set size`): a tuple crosses processes in one record of a shared
/// memory ring, which takes records up to half its 1 MiB.
pub const MAX_SIZE: usize = 256 << 10;
/// Sequence numbers the terminal bolt remembers to find duplicates (a power of two).
pub const SEQ_WINDOW: u64 = 1 << 22;
/// Tuples per `produce` call at most.
const BURST: usize = 64;

/// A Storm benchmark tuple: its sequence number, the spout's send time and its payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StormTuple {
    /// 0, 1, 2, ... in the order the spout sent them.
    pub seq: u64,
    /// `monotonic_ns` when the spout sent it.
    pub sent_ns: u64,
    /// The message, [`MessagePool::index`]`(seq)` of the spout's pool.
    pub payload: Arc<[u8]>,
}

/// Bytes of a tuple's header on the wire: the sequence number and the send time.
const HEADER: usize = 16;

impl Tuple for StormTuple {
    const ENCODING: Encoding = Encoding::Normal;

    fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        out.reserve(HEADER + self.payload.len());
        out.extend_from_slice(&self.seq.to_le_bytes());
        out.extend_from_slice(&self.sent_ns.to_le_bytes());
        out.extend_from_slice(&self.payload);
        Ok(())
    }

    fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let malformed = || DecodeError::Malformed {
            type_name: std::any::type_name::<Self>(),
            reason: format!(
                "{} bytes, shorter than the {HEADER}-byte header",
                bytes.len()
            ),
        };
        let (seq, rest) = bytes.split_first_chunk::<8>().ok_or_else(malformed)?;
        let (sent_ns, payload) = rest.split_first_chunk::<8>().ok_or_else(malformed)?;
        Ok(Self {
            seq: u64::from_le_bytes(*seq),
            sent_ns: u64::from_le_bytes(*sent_ns),
            payload: payload.into(),
        })
    }
}

/// xorshift64*: the random letters of the messages, and which message a tuple carries.
fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

/// The messages a spout sends, made once from a seed.
#[derive(Debug, Clone)]
pub struct MessagePool {
    messages: Vec<Arc<[u8]>>,
    /// Whether tuple `seq` carries message `seq mod n` (in turn) or one drawn from `seq`.
    in_turn: bool,
}

/// `count` strings of `size` random letters from `letters`, drawn from `seed`.
pub fn random_letters(
    count: usize,
    size: usize,
    letters: RangeInclusive<u8>,
    seed: u64,
) -> Vec<Vec<u8>> {
    let mut state = seed.max(1);
    let span = u64::from(letters.end() - letters.start()) + 1;
    (0..count)
        .map(|_| {
            (0..size)
                .map(|_| letters.start() + (xorshift(&mut state) % span) as u8)
                .collect()
        })
        .collect()
}

impl MessagePool {
    /// A pool of `messages` (at least one: an empty list gives one empty message); tuple
    /// `seq` carries one drawn at random from `seq`, as Storm's `RandomMessageSpout` draws one
    /// at random, unless [`MessagePool::in_turn`].
    pub fn new(messages: Vec<Vec<u8>>) -> Self {
        let mut messages: Vec<Arc<[u8]>> = messages.into_iter().map(Arc::from).collect();
        if messages.is_empty() {
            messages.push(Arc::from(&[][..]));
        }
        Self {
            messages,
            in_turn: false,
        }
    }

    /// The pool with message `seq mod count` for tuple `seq`.
    pub fn in_turn(mut self) -> Self {
        self.in_turn = true;
        self
    }

    /// Which message tuple `seq` carries.
    pub fn index(&self, seq: u64) -> usize {
        let n = self.messages.len() as u64;
        let pick = if self.in_turn {
            seq
        } else {
            let mut state = seq.wrapping_add(0x9e37_79b9_7f4a_7c15) | 1;
            xorshift(&mut state)
        };
        (pick % n) as usize
    }

    /// The message tuple `seq` carries.
    pub fn message(&self, seq: u64) -> &Arc<[u8]> {
        &self.messages[self.index(seq)]
    }

    /// The tuple `seq`, stamped `sent_ns`.
    pub fn tuple(&self, seq: u64, sent_ns: u64) -> StormTuple {
        StormTuple {
            seq,
            sent_ns,
            payload: Arc::clone(self.message(seq)),
        }
    }
}

/// The settings both topologies take, read from `--set` and the run's `--rate`.
#[derive(Debug, Clone)]
pub struct TopologySettings {
    /// Instances of each bolt.
    pub parallelism: usize,
    /// Payload bytes.
    pub size: usize,
    /// The seed of the messages.
    pub seed: u64,
    /// Tuples to send before the spout ends; `None`: until the run stops.
    pub tuples: Option<u64>,
    /// Tuples per second; `None`: as fast as possible.
    pub rate: Option<u64>,
}

/// The `--set` keys [`TopologySettings::read`] takes, with their descriptions, given the
/// application's defaults of `parallelism` and `size`.
macro_rules! storm_settings {
    ($parallelism:literal, $size:literal, $($extra:expr),* $(,)?) => {
        &[
            $($extra,)*
            (
                "parallelism",
                concat!(
                    "tasks (instances) of each bolt, shuffle grouping between them (1 to 64, default ",
                    $parallelism,
                    ")"
                ),
            ),
            (
                "size",
                concat!(
                    "bytes of each tuple's random payload (0 to 262144, default ",
                    $size,
                    ")"
                ),
            ),
            ("seed", "seed of the random payloads (default 1)"),
            (
                "tuples",
                "send this many tuples, then end (default: until --duration)",
            ),
        ]
    };
}

impl TopologySettings {
    /// Reads the settings of `storm_settings!` from `config`, with these defaults.
    pub fn read(
        config: &AppConfig,
        default_parallelism: usize,
        default_size: usize,
    ) -> Result<Self, AppError> {
        let settings = &config.settings;
        Ok(Self {
            parallelism: settings.get_in(
                "parallelism",
                default_parallelism,
                1..=MAX_PARALLELISM,
            )?,
            size: settings.get_in("size", default_size, 0..=MAX_SIZE)?,
            seed: settings.get("seed", 1)?,
            tuples: settings.get("tuples", 0u64).map(|n| (n > 0).then_some(n))?,
            rate: config.rate.filter(|r| *r > 0),
        })
    }
}

/// Adds the spout `spout`, sending `pool`'s tuples as `settings` say.
pub fn add_spout(
    g: &mut GraphBuilder,
    pool: &MessagePool,
    settings: &TopologySettings,
) -> OperatorHandle {
    let (pool, rate, limit) = (pool.clone(), settings.rate, settings.tuples);
    g.source(SPOUT, Ports::new().output::<StormTuple>(), move |_| {
        Spout::new(pool.clone(), rate, limit)
    })
}

/// Adds the bolt `name` of `parallelism` instances that `factory` makes, fed by `upstream`
/// through `partitioning`; it passes tuples on unless it is the `terminal` one.
pub fn add_bolt<O, F>(
    g: &mut GraphBuilder,
    upstream: OperatorHandle,
    (name, terminal): (&str, bool),
    parallelism: usize,
    partitioning: Partitioning,
    factory: F,
) -> Result<OperatorHandle, GraphError>
where
    O: Operator + 'static,
    F: Fn(&OperatorContext) -> O + Send + Sync + 'static,
{
    let ports = Ports::new().input::<StormTuple>();
    let ports = if terminal {
        ports
    } else {
        ports.output::<StormTuple>()
    };
    let bolt = g.operator(name, ports, factory);
    g.set_parallelism(bolt, parallelism)?;
    g.connect_with(upstream.out(0), bolt.input(0), partitioning)?;
    Ok(bolt)
}

/// The spout: sends tuple after tuple from its pool at its rate, each stamped as it is
/// emitted.
pub struct Spout {
    pool: MessagePool,
    pacer: Pacer,
    limit: Option<u64>,
    seq: u64,
    first_ns: u64,
    last_ns: u64,
}

impl Spout {
    /// Sends `pool`'s tuples at `rate` (as fast as possible when `None`), `limit` of them or
    /// until the job stops.
    pub fn new(pool: MessagePool, rate: Option<u64>, limit: Option<u64>) -> Self {
        Self {
            pool,
            pacer: Pacer::new(rate),
            limit,
            seq: 0,
            first_ns: 0,
            last_ns: 0,
        }
    }
}

impl Source for Spout {
    fn produce(&mut self, out: &mut Output<'_>) -> Result<Produced, OperatorError> {
        let left = self.limit.map_or(BURST as u64, |n| n - self.seq);
        if left == 0 {
            return Ok(Produced::Exhausted);
        }
        let due = self.pacer.allowance(BURST.min(left as usize));
        if self.first_ns == 0 {
            self.first_ns = monotonic_ns();
        }
        for _ in 0..due {
            let now = monotonic_ns();
            out.emit(0, self.pool.tuple(self.seq, now))?;
            self.seq += 1;
            self.last_ns = now;
        }
        self.pacer.emitted(due);
        Ok(if due == 0 {
            Produced::Idle
        } else {
            Produced::Emitted(due)
        })
    }

    fn resumable(&self) -> bool {
        true
    }

    /// The next sequence number and the send times its report covers (a tuple's message
    /// is the pool's for its sequence number).
    fn snapshot(&mut self) -> Result<Snapshot, OperatorError> {
        Snapshot::whole(&(self.seq, self.first_ns, self.last_ns))
    }

    fn restore(&mut self, snapshot: Snapshot) -> Result<(), OperatorError> {
        (self.seq, self.first_ns, self.last_ns) = snapshot.decode_whole()?;
        Ok(())
    }

    fn stop(&mut self) -> Result<OperatorReport, OperatorError> {
        let mut report = OperatorReport::default();
        report.counters.insert(SENT.into(), self.seq);
        report.counters.insert(
            SENDING_NS.into(),
            self.last_ns.saturating_sub(self.first_ns),
        );
        Ok(report)
    }
}

/// A bolt that passes every tuple on unchanged (storm-benchmark's `ConstBolt`, the
/// throughput test's `IdentityBolt`).
pub struct PassOn;

impl Operator for PassOn {
    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        out.emit(0, expect_tuple::<StormTuple>(port, tuple)?.clone())
    }
}

/// Which sequence numbers arrived, in a sliding window of [`SEQ_WINDOW`] of them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SeqTracker {
    /// One bit per sequence number from `base`, word `w` (absolute) at `w mod len`.
    words: Vec<u64>,
    /// The oldest sequence number the window holds, a multiple of 64.
    base: u64,
    /// Distinct sequence numbers seen.
    pub distinct: u64,
    /// Sequence numbers seen again.
    pub duplicates: u64,
    /// Sequence numbers below the window.
    pub late: u64,
    /// The sum of the distinct sequence numbers, wrapping.
    pub seq_sum: u64,
}

impl Default for SeqTracker {
    fn default() -> Self {
        Self {
            words: vec![0; (SEQ_WINDOW / 64) as usize],
            base: 0,
            distinct: 0,
            duplicates: 0,
            late: 0,
            seq_sum: 0,
        }
    }
}

impl SeqTracker {
    /// Records that `seq` arrived.
    pub fn record(&mut self, seq: u64) {
        if seq < self.base {
            self.late += 1;
            return;
        }
        let words = self.words.len() as u64;
        if seq >= self.base + SEQ_WINDOW {
            let base = (seq + 1 - SEQ_WINDOW).div_ceil(64) * 64;
            let (from, to) = (self.base / 64, base / 64);
            for word in from..to.min(from + words) {
                self.words[(word % words) as usize] = 0;
            }
            self.base = base;
        }
        let word = &mut self.words[((seq / 64) % words) as usize];
        let bit = 1u64 << (seq % 64);
        if *word & bit != 0 {
            self.duplicates += 1;
        } else {
            *word |= bit;
            self.distinct += 1;
            self.seq_sum = self.seq_sum.wrapping_add(seq);
        }
    }
}

/// The terminal bolt's work on each tuple: its latency recorded, its sequence number tracked,
/// its payload compared with the one sent.
pub struct Check {
    pool: MessagePool,
    seqs: SeqTracker,
    received: u64,
    corrupt: u64,
    latency: LatencyHistogram,
}

impl Check {
    /// Checks tuples against `pool`, the spout's.
    pub fn new(pool: MessagePool) -> Self {
        Self {
            pool,
            seqs: SeqTracker::default(),
            received: 0,
            corrupt: 0,
            latency: latency_histogram(),
        }
    }

    /// Checks `tuple`, which arrived at `now_ns`.
    #[inline]
    pub fn record(&mut self, tuple: &StormTuple, now_ns: u64) {
        self.latency
            .saturating_record(now_ns.saturating_sub(tuple.sent_ns));
        self.seqs.record(tuple.seq);
        self.received += 1;
        if tuple.payload[..] != self.pool.message(tuple.seq)[..] {
            self.corrupt += 1;
        }
    }

    /// The distinct tuples checked so far.
    pub fn distinct(&self) -> u64 {
        self.seqs.distinct
    }

    /// What it has checked, to resume from with [`Check::resume`] after a redeploy.
    pub fn state(&self) -> CheckState {
        CheckState {
            seqs: self.seqs.clone(),
            received: self.received,
            corrupt: self.corrupt,
            latency: histogram_pairs(&self.latency),
        }
    }

    /// Goes on from `state`, what another instance had checked.
    pub fn resume(&mut self, state: CheckState) {
        self.seqs = state.seqs;
        self.received = state.received;
        self.corrupt = state.corrupt;
        self.latency = histogram_from_pairs(&state.latency);
    }

    /// The report of what it checked.
    pub fn report(&mut self) -> OperatorReport {
        let mut report = OperatorReport {
            latency: Some(std::mem::replace(&mut self.latency, latency_histogram())),
            ..OperatorReport::default()
        };
        for (name, value) in [
            (RECEIVED, self.received),
            (DISTINCT, self.seqs.distinct),
            (DUPLICATES, self.seqs.duplicates),
            (LATE, self.seqs.late),
            (CORRUPT, self.corrupt),
            (SEQ_SUM, self.seqs.seq_sum % (1 << 32)),
        ] {
            report.counters.insert(name.into(), value);
        }
        report
    }
}

impl Operator for Check {
    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        _out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        let tuple = expect_tuple::<StormTuple>(port, tuple)?;
        self.record(tuple, monotonic_ns());
        Ok(())
    }

    fn snapshot(&mut self) -> Result<Snapshot, OperatorError> {
        Snapshot::whole(&self.state())
    }

    fn restore(&mut self, snapshot: Snapshot) -> Result<(), OperatorError> {
        self.resume(snapshot.decode_whole()?);
        Ok(())
    }

    fn stop(&mut self) -> Result<OperatorReport, OperatorError> {
        Ok(self.report())
    }
}

/// What a [`Check`] has checked: its sequence numbers, corrupt tuples and latencies.
#[derive(Debug, Serialize, Deserialize)]
pub struct CheckState {
    seqs: SeqTracker,
    received: u64,
    corrupt: u64,
    latency: Vec<(u64, u64)>,
}

/// What a finished run of a topology says about its tuples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Integrity {
    /// Tuples the spout sent.
    pub sent: u64,
    /// Tuples the terminal bolt received.
    pub received: u64,
    /// Distinct sequence numbers among them.
    pub distinct: u64,
    /// Sequence numbers received again.
    pub duplicates: u64,
    /// Tuples whose payload was not the one sent.
    pub corrupt: u64,
    /// Tuples older than the window of sequence numbers.
    pub late: u64,
    /// Whether the distinct sequence numbers sum to `0 + 1 + ... + (sent - 1)` (mod 2^32).
    pub seq_sum_matches: bool,
}

impl Integrity {
    /// The figures of `report`, whose spout is `spout` and terminal bolt `terminal`.
    pub fn of(report: &JobReport, spout: &str, terminal: &str) -> Self {
        let sent = counter(report, spout, SENT);
        let expected = (u128::from(sent) * u128::from(sent.saturating_sub(1)) / 2) % (1 << 32);
        Self {
            sent,
            received: counter(report, terminal, RECEIVED),
            distinct: counter(report, terminal, DISTINCT),
            duplicates: counter(report, terminal, DUPLICATES),
            corrupt: counter(report, terminal, CORRUPT),
            late: counter(report, terminal, LATE),
            seq_sum_matches: u128::from(counter(report, terminal, SEQ_SUM) % (1 << 32)) == expected,
        }
    }

    /// Whether every tuple sent arrived exactly once with its payload intact.
    pub fn holds(&self) -> bool {
        self.distinct == self.sent
            && self.received == self.sent
            && self.duplicates == 0
            && self.corrupt == 0
            && self.late == 0
            && self.seq_sum_matches
    }

    /// One line: `integrity: ok, ...` or `integrity: FAILED, ...` with every figure.
    pub fn line(&self) -> String {
        format!(
            "integrity: {}: sent {}, received {}, distinct {}, duplicates {}, corrupt payloads {}, too late to check {}, sequence sum {}",
            if self.holds() {
                "ok, every tuple arrived once with its payload intact"
            } else {
                "FAILED"
            },
            self.sent,
            self.received,
            self.distinct,
            self.duplicates,
            self.corrupt,
            self.late,
            if self.seq_sum_matches { "matches" } else { "differs" }
        )
    }
}

/// The counter `name` of `operator`, summed over its instances (0 when absent).
pub fn counter(report: &JobReport, operator: &str, name: &str) -> u64 {
    report
        .operator_report(operator)
        .counters
        .get(name)
        .copied()
        .unwrap_or(0)
}

/// The input rate the spout `spout` reached: tuples sent over its time sending.
pub fn achieved_rate(report: &JobReport, spout: &str) -> f64 {
    let sent = counter(report, spout, SENT);
    let sending_s = counter(report, spout, SENDING_NS) as f64 / 1e9;
    if sending_s > 0.0 {
        sent as f64 / sending_s
    } else {
        0.0
    }
}

/// The lines a topology prints after a run: tuples delivered, the spout's rate, the
/// latency and the integrity check.
pub fn summary(report: &JobReport, spout: &str, terminal: &str) -> String {
    [
        throughput_line(
            "tuples",
            counter(report, terminal, RECEIVED),
            report.elapsed,
        ),
        format!(
            "spout rate while sending: {:.0} tuples/s",
            achieved_rate(report, spout)
        ),
        latency_line(report.latency().as_ref()),
        Integrity::of(report, spout, terminal).line(),
    ]
    .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tuple_round_trips_and_a_short_one_is_refused() {
        let pool = MessagePool::new(random_letters(3, 10, b'a'..=b'h', 5));
        let tuple = pool.tuple(7, 42);
        let mut bytes = Vec::new();
        tuple.encode(&mut bytes).unwrap();
        assert_eq!(bytes.len(), HEADER + 10);
        assert_eq!(StormTuple::decode(&bytes).unwrap(), tuple);
        let short = StormTuple::decode(&bytes[..15]).unwrap_err().to_string();
        assert!(short.contains("15 bytes"), "{short}");
        assert!(tuple.payload.iter().all(|b| (b'a'..=b'h').contains(b)));
    }

    #[test]
    fn the_pool_is_fixed_by_its_seed_and_picks_by_sequence_number() {
        let a = MessagePool::new(random_letters(100, 32, b'a'..=b'z', 9));
        let b = MessagePool::new(random_letters(100, 32, b'a'..=b'z', 9));
        for seq in 0..1000 {
            assert_eq!(a.message(seq), b.message(seq));
        }
        let picked: std::collections::BTreeSet<usize> = (0..1000).map(|s| a.index(s)).collect();
        assert!(picked.len() > 90, "{} messages used", picked.len());
        let turns = MessagePool::new(random_letters(4, 1, b'a'..=b'z', 9)).in_turn();
        assert_eq!(
            (0..6).map(|s| turns.index(s)).collect::<Vec<_>>(),
            [0, 1, 2, 3, 0, 1]
        );
    }

    #[test]
    fn the_tracker_finds_duplicates_across_its_sliding_window() {
        let mut t = SeqTracker::default();
        for seq in [3, 1, 2, 0, 2] {
            t.record(seq);
        }
        assert_eq!((t.distinct, t.duplicates, t.seq_sum), (4, 1, 6));
        // Far ahead: the window slides past 0..3, which are then too late.
        let far = 3 * SEQ_WINDOW + 5;
        t.record(far);
        t.record(far - 10);
        t.record(far - 10);
        t.record(1);
        assert_eq!((t.distinct, t.duplicates, t.late), (6, 2, 1));
        // Bits of the slid-out words are clear when their slots come round again.
        let mut fresh = SeqTracker::default();
        fresh.record(0);
        fresh.record(SEQ_WINDOW);
        assert_eq!((fresh.distinct, fresh.duplicates), (2, 0));
    }
}
