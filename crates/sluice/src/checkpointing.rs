//! The checkpoint flags of `sluice run` (and `sluice query`): how often a running job takes a checkpoint, where
//! they go, how many are kept, how often the job is restarted from the last one after a
//! failure, and `--from`, which starts a job from a checkpoint or savepoint.
//!
//! A job's checkpoints go to `$XDG_STATE_HOME/sluice/checkpoints/APP-PID` (else
//! `~/.local/state/...`) unless `--checkpoint-dir` says where: durable storage, not the
//! runtime directory the job registry uses, since a checkpoint must outlive a crash of the
//! machine. Over several hosts, the directory must be a mount every host shares.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use sluice_graph::Graph;
use sluice_runtime::{
    CheckpointOptions, StoredCheckpoint, DEFAULT_ALIGN_LIMIT, DEFAULT_CHECKPOINTS_RETAINED,
    DEFAULT_RESTARTS, DEFAULT_RESTART_DELAY,
};

/// The checkpoint flags of `sluice run` and `sluice query`.
#[derive(Args, Debug)]
pub(crate) struct CheckpointArgs {
    /// Take a checkpoint of the running job every DURATION (e.g. `1s`, `200ms`, `0.5`):
    /// a PE or thread that fails then costs a restart from the last one, not the job. Every
    /// source must be able to replay (files and generators can; sockets cannot).
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    checkpoint_every: Option<Duration>,
    /// Where the checkpoints go (default `$XDG_STATE_HOME/sluice/checkpoints/APP-PID`); a
    /// mount every host shares when the PEs run on several.
    #[arg(long, value_name = "DIR", requires = "checkpoint_every")]
    checkpoint_dir: Option<PathBuf>,
    /// Complete checkpoints kept (default 3); older ones are deleted.
    #[arg(long, value_name = "K", requires = "checkpoint_every",
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    checkpoints_retained: Option<u32>,
    /// Times the job is restarted from its last complete checkpoint after a failure before
    /// it fails for good (default 3).
    #[arg(long, value_name = "N", requires = "checkpoint_every")]
    restarts: Option<u32>,
    /// The wait before each restart (default 100ms).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "checkpoint_every")]
    restart_delay: Option<Duration>,
    /// `aligned` (default): an instance holds back each input past its barrier until every
    /// input's barrier is in; `unaligned`: it takes its state at the first barrier and keeps
    /// the tuples still in flight on its other inputs with it, so a barrier stuck behind full
    /// queues (backpressure) does not hold the checkpoint up.
    #[arg(long, value_name = "MODE", requires = "checkpoint_every",
          value_parser = ["aligned", "unaligned"])]
    checkpoint_mode: Option<String>,
    /// An aligned checkpoint goes unaligned at an instance that would otherwise hold back
    /// more than this many tuples while it waits for its other inputs' barriers (default
    /// 1000000): what an alignment holds in memory is bounded.
    #[arg(long, value_name = "TUPLES", requires = "checkpoint_every",
          value_parser = clap::value_parser!(u64).range(1..))]
    checkpoint_align_limit: Option<u64>,
    /// Start from a checkpoint or savepoint: one checkpoint's directory, or a job's
    /// checkpoint directory (its latest complete checkpoint). The plan and parallelism may
    /// differ from the run that took it: keys are dealt to their new instances.
    #[arg(long, value_name = "DIR")]
    from: Option<PathBuf>,
}

/// A duration as a person writes it (`1s`, `200ms`, `0.5`), as a program's configuration
/// reads it.
pub(crate) use sluice_runtime::configuration::parse_duration;

impl CheckpointArgs {
    /// Whether the run takes checkpoints.
    pub(crate) fn is_on(&self) -> bool {
        self.checkpoint_every.is_some()
    }

    /// The run's checkpoint options for application `app` of graph `graph`, if it takes
    /// checkpoints; makes the default directory. Refused, naming them, when some of the
    /// graph's sources cannot replay their input after a failure.
    pub(crate) fn options(
        &self,
        app: &str,
        graph: &Graph,
    ) -> anyhow::Result<Option<CheckpointOptions>> {
        if self.is_on() {
            graph.check_replayable(app)?;
        }
        self.options_unchecked(app)
    }

    /// The checkpoint options of `app` whose sources are checked by the caller
    /// ([`Graph::check_replayable`]): `sluice query`, which checks each query's job.
    pub(crate) fn options_unchecked(&self, app: &str) -> anyhow::Result<Option<CheckpointOptions>> {
        let Some(every) = self.checkpoint_every else {
            return Ok(None);
        };
        let dir = match &self.checkpoint_dir {
            Some(dir) => dir.clone(),
            None => default_dir(app)?,
        };
        let dir: &'static Path = Box::leak(dir.into_boxed_path());
        Ok(Some(CheckpointOptions {
            retained: self
                .checkpoints_retained
                .map_or(DEFAULT_CHECKPOINTS_RETAINED, |k| k as usize),
            restarts: self.restarts.unwrap_or(DEFAULT_RESTARTS),
            restart_delay: self.restart_delay.unwrap_or(DEFAULT_RESTART_DELAY),
            unaligned: self.checkpoint_mode.as_deref() == Some("unaligned"),
            align_limit: self.checkpoint_align_limit.unwrap_or(DEFAULT_ALIGN_LIMIT),
            ..CheckpointOptions::new(every, dir)
        }))
    }

    /// The checkpoint `--from` starts the job from (verified, its state left on disk for the
    /// instances to read).
    pub(crate) fn from(&self) -> anyhow::Result<Option<StoredCheckpoint>> {
        let Some(dir) = &self.from else {
            return Ok(None);
        };
        let loaded = sluice_runtime::load_checkpoint(dir)
            .with_context(|| format!("--from {}", dir.display()))?;
        Ok(Some(loaded))
    }
}

/// `$XDG_STATE_HOME/sluice/checkpoints/APP-PID` (else under `~/.local/state`, else the
/// temporary directory).
fn default_dir(app: &str) -> anyhow::Result<PathBuf> {
    Ok(default_root().join(format!("{app}-{}", std::process::id())))
}

/// Where the jobs' default checkpoint directories are, one per job id:
/// `$XDG_STATE_HOME/sluice/checkpoints` (else under `~/.local/state`, else the temporary
/// directory).
pub(crate) fn default_root() -> PathBuf {
    crate::shell::state_dir(std::env::var_os("XDG_STATE_HOME"), std::env::var_os("HOME"))
        .unwrap_or_else(|| std::env::temp_dir().join("sluice"))
        .join("checkpoints")
}
