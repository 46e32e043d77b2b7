//! SOL, Storm's "speed of light" benchmark (storm-benchmark's `SOL`, forked from Yahoo's
//! storm-perf-test; the TurboStream paper's network-sensitive benchmark, configured there with
//! one spout and five bolts of five tasks each): a spout of random messages and a chain of
//! bolts that pass each tuple on, shuffle-grouped from level to level.
//!
//! ```text
//! spout --round-robin--> bolt-1 (xP) --round-robin--> ... --round-robin--> sink (xP)
//!                        \_______________ levels bolts in all ______________/
//! ```
//!
//! As in storm-benchmark, the spout pre-generates 100 messages of `size` random letters
//! (`RandomMessageSpout`) and sends one drawn at random with each tuple; every bolt passes the
//! tuple on unchanged (`ConstBolt`). Storm's default shuffle grouping deals tuples evenly over
//! the next level's tasks at random; Sluice deals them in turn (round-robin partitioning), the
//! same load without the draw. storm-benchmark counts the spout as one of its `topology.level`
//! levels; here `--set levels` counts the bolts, the last of which (`sink`) measures: it
//! records each tuple's end-to-end latency from the send time the tuple carries and checks
//! that every tuple arrived exactly once with its payload intact ([`crate::storm`]).
//!
//! The spout sends at `--rate` tuples per second (as fast as possible without one) until
//! `--duration` ends or, with `--set tuples=N`, after N tuples. Sluice runs one instance of a
//! source, so the spout has one task (storm-benchmark's default is four).

use sluice_graph::{GraphBuilder, Partitioning};

use crate::storm::{self, Check, MessagePool, PassOn, TopologySettings};
use crate::{App, AppConfig, AppError, AppSpec};

/// The registry entry.
pub const SPEC: AppSpec = AppSpec {
    name: "sol",
    about: "Storm's speed-of-light benchmark: a spout and a chain of bolts passing random tuples on (TurboStream's SOL)",
    settings: storm_settings!(
        5,
        100,
        (
            "levels",
            "bolts in the chain, the last one measuring (1 to 32, default 5)"
        )
    ),
    build,
    plans: &[],
};

/// The most bolts in the chain (`--set levels`).
pub const MAX_LEVELS: usize = 32;
/// Different messages the spout sends, as storm-benchmark's `RandomMessageSpout`.
pub const MESSAGES: usize = 100;
/// The last bolt, which measures and checks.
pub const SINK: &str = "sink";

/// The messages of SOL's spout under `settings`.
fn pool(settings: &TopologySettings) -> MessagePool {
    MessagePool::new(storm::random_letters(
        MESSAGES,
        settings.size,
        b'a'..=b'z',
        settings.seed,
    ))
}

/// The settings `config` gives SOL, its number of levels and its spout's messages.
pub fn read(config: &AppConfig) -> Result<(TopologySettings, usize, MessagePool), AppError> {
    let settings = TopologySettings::read(config, 5, 100)?;
    let levels = config.settings.get_in("levels", 5, 1..=MAX_LEVELS)?;
    let pool = pool(&settings);
    Ok((settings, levels, pool))
}

fn build(config: &AppConfig) -> Result<App, AppError> {
    let (settings, levels, pool) = read(config)?;
    let mut g = GraphBuilder::new("sol");
    let mut upstream = storm::add_spout(&mut g, &pool, &settings);
    for level in 1..levels {
        upstream = storm::add_bolt(
            &mut g,
            upstream,
            (&format!("bolt-{level}"), false),
            settings.parallelism,
            Partitioning::RoundRobin,
            |_| PassOn,
        )?;
    }
    storm::add_bolt(
        &mut g,
        upstream,
        (SINK, true),
        settings.parallelism,
        Partitioning::RoundRobin,
        move |_| Check::new(pool.clone()),
    )?;
    Ok(App::new(
        g.build()?,
        Box::new(|report| storm::summary(report, storm::SPOUT, SINK)),
    )
    .with_finite_input(storm::SPOUT, settings.tuples, "tuples"))
}
