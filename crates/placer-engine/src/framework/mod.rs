//! The scheduling framework: extension points as small traits, what they answer, and the
//! registry that builds a profile's plugins by name.
//!
//! * [`pod`]: pod level: PreFilter / Filter, PreScore / Score / NormalizeScore, Reserve /
//!   Unreserve, Permit, PreBind, the per-pod [`CycleState`] with typed per-plugin data.
//! * [`placement`]: KEP-5732's PlacementGenerate, PlacementFeasible, PlacementScore and the
//!   selection they feed.
//! * [`group`]: the PodGroup cycle's types: input, attempt, the outcome every strategy
//!   answers with, the preemption hooks.
//! * [`registry`]: every plugin by name and extension point; a profile (defaults, minus
//!   what `plugins.<point>.disabled` names, plus what `enabled` adds) is built from it.
//! * [`parsed`], [`helper`], [`normalize`]: what plugins share: the parsed pod, label and
//!   node selectors, taints, score normalization.
//!
//! Plugins (`crate::plugins`) import only this module: the names below re-export the parts
//! of the model and the snapshot a plugin reads.

pub mod group;
pub mod helper;
pub mod normalize;
pub mod parsed;
pub mod placement;
pub mod pod;
pub mod preemption;
pub mod registry;
mod status;

#[allow(unused_imports)] // what a plugin may name, used or not yet
pub use group::{GroupCycle, GroupOutcome, PodScheduler};
pub use parsed::{AffinityTerm, ParsedPod, PodTerms, SpreadConstraint};
pub use placement::{
    requested_after, GeneratedPlacements, Placement, PlacementCandidate, PlacementFeasible,
    PlacementFramework, PlacementGenerate, PlacementProgress, PlacementScore,
};
#[allow(unused_imports)] // the extension points, some used only by tests yet
pub use pod::{
    BindWrites, CopyCounting, CycleData, CycleState, Dependence, FilterPlugin, Framework, PermitPlugin,
    PermitVerdict, PreBindPlugin, QuickPass, ReservePlugin, ScorePlugin, Shortcuts,
};
pub use registry::Registry;
pub use status::{Code, FilterResult, FitError, PreResult, Rejection, Status, MAX_NODE_SCORE};

// What plugins read of the rest of the engine.
pub use crate::config::args::InterPodAffinityConfig;
pub use crate::config::{SchedulerConfig, ScoringStrategy};
#[allow(unused_imports)]
pub use crate::model::{NodeId, NodeStatic, PodInfo, PodVolume};
pub use crate::resources::{scaled, Resources, CPU, EPHEMERAL_STORAGE, MEMORY};
pub use crate::snapshot::dra::{ClaimEntry, ClaimWrite, DeviceId, PodClaimState};
pub use crate::snapshot::volumes::{self, ClaimsError, PodClaims, PodVolumes, VolumeState};
pub use crate::snapshot::{NodeState, Snapshot, DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST};
