//! MPI's lifetime in a PE: initialised once per process with `MPI_THREAD_MULTIPLE` (the
//! endpoints of a PE's threads call MPI at once), finalised once after the PE's work is done.
//!
//! Open MPI's `MPI_Init` and `MPI_Finalize` wait for every rank of the job, so a job whose plan
//! has an `mpi` edge initialises MPI in every one of its PEs, whether or not that PE has such
//! an edge (the runtime does this), and a PE finalises only after a clean end (a failing PE
//! exits without, and `mpirun` takes the others down).

use std::sync::Mutex;

use mpi::environment::Universe;
use mpi::Threading;

use crate::TransportError;

/// The environment variable Open MPI sets in every process it starts.
pub const ENV_RANK: &str = "OMPI_COMM_WORLD_RANK";

/// The initialised MPI environment of this process; `None` before [`initialize`] and after
/// [`finalize`].
static UNIVERSE: Mutex<Option<Universe>> = Mutex::new(None);

/// Initialises MPI in this process with `MPI_THREAD_MULTIPLE`, once; `pe` is the PE this
/// process runs, which must be its rank. Refused outside a process started by `mpirun` (the
/// `mpi` launcher), where MPI would start a singleton job of its own instead.
pub fn initialize(pe: usize) -> Result<(), TransportError> {
    let setup = |m: String| Err(TransportError::Setup(format!("the mpi transport: {m}")));
    if std::env::var_os(ENV_RANK).is_none() {
        return setup(
            "this process was not started by mpirun: the mpi transport runs only between PEs \
             launched with --launcher mpi"
                .into(),
        );
    }
    let mut universe = UNIVERSE.lock().unwrap_or_else(|e| e.into_inner());
    if universe.is_some() {
        return Ok(());
    }
    let Some((initialised, provided)) = mpi::initialize_with_threading(Threading::Multiple) else {
        return setup("MPI was already initialised by someone else in this process".into());
    };
    // Held from here on, so a refusal below still finalises when the process ends cleanly.
    *universe = Some(initialised);
    if provided != Threading::Multiple {
        return setup(format!(
            "MPI provides thread level {provided:?}, but PEs call MPI from several threads \
             and need Multiple (build Open MPI with thread support)"
        ));
    }
    let rank = super::request::own_rank();
    if usize::try_from(rank).ok() != Some(pe) {
        return setup(format!("this process is PE {pe} but MPI rank {rank}"));
    }
    Ok(())
}

/// Finalises MPI if [`initialize`] initialised it; waits for every other rank to do the same.
pub fn finalize() {
    let universe = UNIVERSE.lock().unwrap_or_else(|e| e.into_inner()).take();
    drop(universe);
}

/// Checks that MPI is initialised with `MPI_THREAD_MULTIPLE`, before an endpoint is made.
pub(crate) fn check_ready() -> Result<(), TransportError> {
    let ready = UNIVERSE.lock().unwrap_or_else(|e| e.into_inner()).is_some()
        && mpi::environment::threading_support() == Threading::Multiple;
    if ready {
        Ok(())
    } else {
        Err(TransportError::Setup(
            "the mpi transport: MPI is not initialised in this process; it runs only between \
             PEs launched with --launcher mpi"
                .into(),
        ))
    }
}
