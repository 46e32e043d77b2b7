//! What a job starts from when it does not start afresh ([`ResumeFrom`]): a suspended job's
//! state, held in memory (a redeploy), or a checkpoint on disk (a restart, `--from`); and the
//! part of it each PE is sent ([`PeResume`]).
//!
//! A state in memory goes to a PE of another host as frames before its start message
//! ([`crate::wire::StateFrames`]), to one of this host as part files; a checkpoint goes as the
//! entries of the PE's own parts, which the PE reads from the checkpoint's directory itself, so
//! restoring a large state costs no encoding in the launcher. Neither meets a message limit.

use serde::{Deserialize, Serialize};
use sluice_plan::PhysicalPlan;

use crate::wire::StateFrames;
use crate::{JobState, RunError, StoredCheckpoint};

/// What a job resumes from.
#[derive(Debug, Clone, Copy)]
pub enum ResumeFrom<'a> {
    /// A suspended job's state ([`crate::JobReport::state`]).
    State(&'a JobState),
    /// A complete checkpoint or savepoint ([`crate::load_checkpoint`]).
    Checkpoint(&'a StoredCheckpoint),
}

impl<'a> From<&'a JobState> for ResumeFrom<'a> {
    fn from(state: &'a JobState) -> Self {
        ResumeFrom::State(state)
    }
}

impl<'a> From<&'a StoredCheckpoint> for ResumeFrom<'a> {
    fn from(checkpoint: &'a StoredCheckpoint) -> Self {
        ResumeFrom::Checkpoint(checkpoint)
    }
}

impl<'a> ResumeFrom<'a> {
    /// What PE `pe` of `plan` is sent of it.
    pub(crate) fn for_pe(self, plan: &PhysicalPlan, pe: usize) -> PeResume {
        match self {
            ResumeFrom::State(state) => PeResume::State(state.for_pe(plan, pe)),
            ResumeFrom::Checkpoint(checkpoint) => PeResume::Checkpoint(checkpoint.for_pe(plan, pe)),
        }
    }

    /// The whole state, for PEs that run as threads of this process (a checkpoint's parts
    /// read from its files; a suspended job's state copied, since each instance takes its own
    /// out of it as it starts).
    pub(crate) fn state(self) -> Result<JobState, RunError> {
        match self {
            ResumeFrom::State(state) => Ok(state.clone()),
            ResumeFrom::Checkpoint(checkpoint) => checkpoint.state(),
        }
    }
}

/// The part of what the job resumes from that one PE is sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum PeResume {
    /// The state of its instances, which is sent as frames ([`PeResume::Framed`]).
    State(JobState),
    /// The state of its instances is in the frames sent before the plan.
    Framed,
    /// Where its instances' parts are.
    Checkpoint(StoredCheckpoint),
}

impl PeResume {
    /// The state of its instances (read from the checkpoint's files for a checkpoint, put
    /// together from `framed` for frames).
    pub(crate) fn into_state(self, framed: &mut StateFrames) -> Result<JobState, RunError> {
        match self {
            PeResume::State(state) => Ok(state),
            PeResume::Framed => framed.finish("the state the job resumes from"),
            PeResume::Checkpoint(checkpoint) => checkpoint.state(),
        }
    }
}
