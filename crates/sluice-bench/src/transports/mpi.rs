//! `--transport mpi`: the `mpi` transport between two ranks of one `mpirun`, rank 0 sending
//! on core 0 and rank 1 receiving on core 1 (Open MPI's own binding is turned off, each rank
//! pins itself), against raw TCP on loopback between the same two cores measured in the same
//! run (module `network`).
//!
//! The benchmark process starts `mpirun -np 2` on its own binary with the benchmark's
//! settings (`sluice bench throughput|latency --transport mpi ...`); in the ranks, where Open
//! MPI sets `OMPI_COMM_WORLD_RANK`, the same command runs one side of one run ([`rank`]), and
//! rank 1 prints its figures as one line of JSON, which `mpirun` passes on. Needs the `mpi`
//! feature (and `mpirun`); without either the run fails saying which is missing.

use std::process::Command;

use anyhow::Context;

use crate::foundation::args::{Bench, Settings};
use crate::foundation::record::RunFigures;
use crate::transports::endpoints::{encoding_name, PeerProcess};

/// The environment variable Open MPI sets in every rank.
const ENV_RANK: &str = "OMPI_COMM_WORLD_RANK";

/// Whether this process is a rank of a benchmark's `mpirun`.
pub(crate) fn in_rank() -> bool {
    std::env::var_os(ENV_RANK).is_some()
}

/// One run: `mpirun` with a sending and a receiving rank; returns the receiver's figures.
pub(crate) fn run(s: &Settings) -> anyhow::Result<RunFigures> {
    if !cfg!(feature = "mpi") {
        anyhow::bail!(
            "the mpi transport: this sluice was built without the mpi feature (rebuild with \
             --features mpi)"
        );
    }
    let mut command = Command::new("mpirun");
    command.args(["--oversubscribe", "--bind-to", "none", "-np", "2"]);
    if is_root() {
        // Open MPI refuses root unless told twice.
        command
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    }
    command
        .arg(std::env::current_exe().context("find the sluice binary")?)
        .arg("bench");
    match s.bench {
        Bench::Throughput => command.arg("throughput"),
        Bench::Latency { rate } => command.args(["latency", "--rate", &rate.to_string()]),
    };
    command
        .args(["--transport", "mpi", "--size", &s.size.to_string()])
        .args(["--encoding", encoding_name(s.encoding)])
        .args(["--duration", &s.duration.as_secs_f64().to_string()])
        .args(["--warmup", &s.warmup.as_secs_f64().to_string()])
        .args(["--repeat", "1"]);
    if let Some(idle) = s.idle {
        command.args(["--idle", idle.name()]);
    }
    PeerProcess::start(command)
        .context("start mpirun (is Open MPI installed? Debian: apt-get install openmpi-bin)")?
        .figures()
        .context("the mpi ranks")
}

/// Whether this process runs as root.
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
    })
}

#[cfg(feature = "mpi")]
pub(crate) use ranks::rank;

/// The side of the run this rank plays.
#[cfg(feature = "mpi")]
mod ranks {
    use anyhow::Context;
    use sluice_transport::mpi::{bind_receiver, open_sender, session, MpiParams, Route};
    use sluice_types::monotonic_ns;

    use super::ENV_RANK;
    use crate::foundation::args::{Bench, Settings, TupleEncoding};
    use crate::foundation::load::{Load, Pacer};
    use crate::foundation::payload::{dispatch, Payload, PayloadVisitor};
    use crate::foundation::record::{Counting, Recorder, RunFigures, Timing};
    use crate::transports::endpoints::{encoded_size, pin, record, send, send_pinned};

    /// Runs this rank's side of one run: rank 0 sends, rank 1 receives and prints its
    /// figures.
    pub(crate) fn rank(s: &Settings) -> anyhow::Result<()> {
        let rank: usize = std::env::var(ENV_RANK)
            .ok()
            .and_then(|r| r.parse().ok())
            .context("no MPI rank in the environment")?;
        session::initialize(rank)?;
        let facade = s.encoding == TupleEncoding::Facade;
        dispatch(facade, s.size, Side { s, rank })??;
        session::finalize();
        Ok(())
    }

    struct Side<'a> {
        s: &'a Settings,
        rank: usize,
    }

    impl PayloadVisitor for Side<'_> {
        type Output = anyhow::Result<()>;

        fn visit<P: Payload>(self, size: usize) -> Self::Output {
            let template = P::template(size);
            let params = MpiParams {
                max_tuple_bytes: encoded_size(&template)?,
                ..MpiParams::default()
            };
            let route = Route {
                receiver: 1,
                channel: 0,
                sender: 0,
            };
            let s = self.s;
            if self.rank == 0 {
                let load = match s.bench {
                    Bench::Throughput => Load::Flood,
                    Bench::Latency { rate } => Load::Paced(Pacer::new(rate)),
                };
                let mut tx = open_sender::<P>(route, &params)?;
                return send_pinned(s, |idle| {
                    send(
                        std::slice::from_mut(&mut tx),
                        template,
                        load,
                        s.span(),
                        idle,
                        0,
                    )
                });
            }
            let figures = match s.bench {
                Bench::Throughput => receive::<P, Counting>(s, route, &params, size)?,
                Bench::Latency { .. } => receive::<P, Timing>(s, route, &params, size)?,
            };
            println!("{}", serde_json::to_string(&figures)?);
            Ok(())
        }
    }

    fn receive<P: Payload, R: Recorder>(
        s: &Settings,
        route: Route,
        params: &MpiParams,
        size: usize,
    ) -> anyhow::Result<RunFigures> {
        let _pinned = pin(1);
        let warmup_ns = u64::try_from(s.warmup.as_nanos()).unwrap_or(u64::MAX);
        let mut recorder = R::new(monotonic_ns().saturating_add(warmup_ns));
        let mut rx = bind_receiver::<P>(route, 1, params)?;
        let idle = s.idle.unwrap_or(sluice_sync::IdleStrategy::Yield);
        record(&mut rx, &mut recorder, idle, 1, None)?;
        RunFigures::from_report(&recorder.report(), size)
    }
}

/// Without the `mpi` feature a rank has nothing to run.
#[cfg(not(feature = "mpi"))]
pub(crate) fn rank(_: &Settings) -> anyhow::Result<()> {
    anyhow::bail!("the mpi transport: this sluice was built without the mpi feature")
}
