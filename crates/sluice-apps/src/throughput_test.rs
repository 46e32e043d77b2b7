//! The Storm Throughput Test topology, as the TurboStream paper cites it (\[27\],
//! github.com/stormprocessor/storm-benchmark; the paper's Figure 10 plots its latency against
//! the input rate).
//!
//! What that repository holds: one topology, `storm.benchmark.ThroughputTest`. Its spout
//! (`GenSpout`) makes, once per task, a random 5-letter `id` and a random `item` of `size`
//! letters (from `a` to `h`) and emits the pair `(id, item)` again and again, as fast as it
//! can. Three bolts are defined: `IdentityBolt` (emits what it gets), `CountBolt` (counts
//! its tuples and emits the count) and `AckBolt` (emits nothing). The `main` that was committed
//! wires only `spout -> AckBolt` (shuffle grouping); the chain it shows commented out is
//! `spout -> IdentityBolt` (shuffle grouping) `-> CountBolt` (fields grouping on `id`), with
//! `spout` and `bolt` tasks each (its example: size 100, 8 spout and 8 bolt tasks). We follow
//! that chain, the one with bolts in a row:
//!
//! ```text
//! spout --round-robin--> identity (xP) --key-by(id)--> count (xP)
//! ```
//!
//! - Sluice runs one instance of a source, so the one spout stands for `--set ids` spout
//!   tasks: it has one `(id, item)` per task and sends them in turn. The ids are what the
//!   fields grouping spreads over the count's instances.
//! - A tuple's payload is its id followed by its item: `size + 5` bytes.
//! - Shuffle grouping deals tuples in turn (round-robin) rather than at random.
//! - `count` counts tuples per id, as `CountBolt` counts, and is where each tuple's end-to-end
//!   latency is measured and its integrity checked ([`crate::storm`]); its summary gives the
//!   number of ids it counted.
//!
//! The spout sends at `--rate` tuples per second (as fast as possible without one) until
//! `--duration` ends or, with `--set tuples=N`, after N tuples.

use sluice_graph::{
    expect_tuple, GraphBuilder, KeyedEntries, Operator, OperatorError, OperatorReport, Output,
    Partitioning, Snapshot,
};
use sluice_types::{monotonic_ns, partition_hash, KeyMap, TupleRef};

use crate::storm::{self, Check, MessagePool, PassOn, StormTuple, TopologySettings};
use crate::{App, AppConfig, AppError, AppSpec};

/// The registry entry.
pub const SPEC: AppSpec = AppSpec {
    name: "throughput-test",
    about: "Storm's Throughput Test topology: random (id, item) tuples through an identity bolt to a count by id (TurboStream's Fig. 10)",
    settings: storm_settings!(
        8,
        100,
        (
            "ids",
            "spout tasks the one spout stands for, each with its own random id (1 to 1024, default 8)"
        )
    ),
    build,
    plans: &[],
};

/// Letters of an id.
pub const ID_LEN: usize = 5;
/// The most ids (`--set ids`).
pub const MAX_IDS: usize = 1024;
/// The counting bolt, which measures and checks.
pub const COUNT: &str = "count";
/// The counter of ids the count saw.
pub const IDS: &str = "ids";

/// The messages of the spout under `settings` with `ids` spout tasks: for each task, its id
/// followed by its item, sent in turn.
fn pool(settings: &TopologySettings, ids: usize) -> MessagePool {
    let letters = b'a'..=b'h';
    let names = storm::random_letters(ids, ID_LEN, letters.clone(), settings.seed);
    let items = storm::random_letters(ids, settings.size, letters, settings.seed ^ 0x5eed);
    let messages = names
        .into_iter()
        .zip(items)
        .map(|(mut id, item)| {
            id.extend(item);
            id
        })
        .collect();
    MessagePool::new(messages).in_turn()
}

/// The settings `config` gives the topology, and its spout's messages.
pub fn read(config: &AppConfig) -> Result<(TopologySettings, MessagePool), AppError> {
    let settings = TopologySettings::read(config, 8, 100)?;
    let ids = config.settings.get_in("ids", 8, 1..=MAX_IDS)?;
    let pool = pool(&settings, ids);
    Ok((settings, pool))
}

/// The id a tuple carries: the first [`ID_LEN`] bytes of its payload.
fn id(tuple: &StormTuple) -> &[u8] {
    &tuple.payload[..ID_LEN.min(tuple.payload.len())]
}

/// `CountBolt`: counts tuples per id, and checks each.
pub struct Count {
    check: Check,
    counts: KeyMap<Box<[u8]>, u64>,
}

impl Count {
    /// Counts and checks tuples from the spout of `pool`.
    pub fn new(pool: MessagePool) -> Self {
        Self {
            check: Check::new(pool),
            counts: KeyMap::default(),
        }
    }

    /// Counts and checks `tuple`, which arrived at `now_ns`.
    #[inline]
    pub fn record(&mut self, tuple: &StormTuple, now_ns: u64) {
        self.check.record(tuple, now_ns);
        match self.counts.get_mut(id(tuple)) {
            Some(count) => *count += 1,
            None => {
                self.counts.insert(id(tuple).into(), 1);
            }
        }
    }
}

impl Operator for Count {
    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        _out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        self.record(expect_tuple::<StormTuple>(port, tuple)?, monotonic_ns());
        Ok(())
    }

    /// What it checked, and its count of every id as keyed state (so that another
    /// parallelism deals each id's count to the instance its tuples go to).
    fn snapshot(&mut self) -> Result<Snapshot, OperatorError> {
        let mut snapshot = Snapshot::whole(&self.check.state())?;
        snapshot.keyed = KeyedEntries::with_capacity(self.counts.len());
        for (id, count) in &self.counts {
            snapshot
                .keyed
                .push(partition_hash(&id[..]), id, &count.to_le_bytes());
        }
        Ok(snapshot)
    }

    fn restore(&mut self, snapshot: Snapshot) -> Result<(), OperatorError> {
        self.check.resume(snapshot.decode_whole()?);
        for entry in snapshot.keyed.iter() {
            let count = <[u8; 8]>::try_from(entry.state).map_err(|_| {
                OperatorError::Failed("an id's count in a snapshot is not 8 bytes".into())
            })?;
            self.counts
                .insert(entry.key.into(), u64::from_le_bytes(count));
        }
        Ok(())
    }

    fn stop(&mut self) -> Result<OperatorReport, OperatorError> {
        let mut report = self.check.report();
        report.counters.insert(IDS.into(), self.counts.len() as u64);
        Ok(report)
    }
}

fn build(config: &AppConfig) -> Result<App, AppError> {
    let (settings, pool) = read(config)?;
    let mut g = GraphBuilder::new("throughput-test");
    let spout = storm::add_spout(&mut g, &pool, &settings);
    let identity = storm::add_bolt(
        &mut g,
        spout,
        ("identity", false),
        settings.parallelism,
        Partitioning::RoundRobin,
        |_| PassOn,
    )?;
    storm::add_bolt(
        &mut g,
        identity,
        (COUNT, true),
        settings.parallelism,
        Partitioning::by_hash(|t: &StormTuple| partition_hash(id(t))),
        move |_| Count::new(pool.clone()),
    )?;
    Ok(App::new(
        g.build()?,
        Box::new(|report| {
            format!(
                "{}\nids counted: {}",
                storm::summary(report, storm::SPOUT, COUNT),
                storm::counter(report, COUNT, IDS)
            )
        }),
    )
    .with_finite_input(storm::SPOUT, settings.tuples, "tuples"))
}
