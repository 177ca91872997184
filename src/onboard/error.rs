//! Why onboarding refuses to draft: measurements that do not belong together, a figure
//! that cannot be a ceiling, a variant the wave run lacks or no tolerance holds, a
//! disturbed measurement, a name that is no profile name, or the draft's own profile or
//! bless refusing it. Each carries what it is about as data.

use crate::model::gpu::Environment;
use crate::model::settings::Mode;
use crate::model::variant::Variant;

/// Why a draft (or one of its steps) was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OnboardError {
    /// A figure of the ceilings microbenchmark that is not finite, or below one half
    /// (which would round to 0).
    #[error("the ceilings measurement gave {figure} = {value}: expected a finite figure of at least 0.5")]
    NotACeiling { figure: &'static str, value: f64 },
    /// A variant of the serial run the wave run lacks.
    #[error("{variant} missing from the wave run")]
    MissingFromWave { variant: String },
    /// A distance from the baseline that is not a number.
    #[error("a distance of {moved} from the baseline")]
    DistanceNotANumber { moved: f64 },
    /// A distance from the baseline (a fraction) no tolerance below 1 holds.
    #[error("moved {:.2}% from its baseline: no tolerance below 100% holds it", .moved * 100.0)]
    NoTolerance { moved: f64 },
    /// A variant one of the runs (of `mode`) lacks.
    #[error("{variant}: not in one of the {mode:?} runs")]
    NotInRun { variant: Variant, mode: Mode },
    /// The steadiness of `variant` gives it no width.
    #[error("{variant}: {cause}")]
    Unsteady {
        variant: Variant,
        #[source]
        cause: Box<OnboardError>,
    },
    /// The baselines' widths cannot be drafted from runs this unsteady.
    #[error("{cause}: onboard again on an idle GPU")]
    Steadiness {
        #[source]
        cause: Box<OnboardError>,
    },
    /// A case that could not be judged because its measurement was disturbed (`why`, the
    /// verdict's words); `run` is the extra run's number, `None` for the chosen or other
    /// mode's run.
    #[error("{}{case}: not judged, the measurement was disturbed ({why}): onboard again on an idle GPU", .run.map_or_else(String::new, |i| format!("extra run {i}: ")))]
    Disturbed {
        run: Option<usize>,
        case: String,
        why: String,
    },
    /// The serial or wave run has no environment: it was not measured.
    #[error("the {which} results have no environment: onboarding needs a measurement")]
    Unmeasured { which: &'static str },
    /// Extra run `run` (1-based) of `of` has no environment.
    #[error("extra run {run} of {of} has no environment: onboarding needs a measurement")]
    ExtraUnmeasured { run: usize, of: usize },
    /// The serial and wave runs measured different GPUs.
    #[error("the serial run measured {:?} (compute capability {}), the wave run {:?} (compute capability {}): onboarding needs both from one GPU", .serial.gpu_name, .serial.compute_capability, .wave.gpu_name, .wave.compute_capability)]
    TwoGpus {
        serial: Box<Environment>,
        wave: Box<Environment>,
    },
    /// The ceilings and the probe measured different GPUs (name, compute capability).
    #[error("the ceilings were measured on {:?} (compute capability {}), the probe on {:?} (compute capability {}): onboarding needs both from one GPU", .ceilings.0, .ceilings.1, .probe.0, .probe.1)]
    CeilingsElsewhere {
        ceilings: (String, String),
        probe: (String, String),
    },
    /// The run given as one mode's was measured in the other.
    #[error("the {expected:?} results were measured in {measured:?} mode")]
    WrongMode { expected: Mode, measured: Mode },
    /// A name that is not a profile name.
    #[error("cannot onboard as {name:?}: a profile name is letters, digits, '_' or '-', and not {:?} (give one with --name)", crate::catalog::DOCUMENTED)]
    BadName { name: String },
    /// Extra run `run` of `of` measured another GPU or toolchain than the chosen mode's run.
    #[error("extra run {run} of {of} measured {:?} (compute capability {}), driver {}, NVRTC {}; the {mode:?} run {:?} (compute capability {}), driver {}, NVRTC {}: onboarding needs every run from one GPU and toolchain", .extra.gpu_name, .extra.compute_capability, .extra.driver_version, .extra.nvrtc_version, .chosen.gpu_name, .chosen.compute_capability, .chosen.driver_version, .chosen.nvrtc_version)]
    ExtraElsewhere {
        run: usize,
        of: usize,
        mode: Mode,
        extra: Box<Environment>,
        chosen: Box<Environment>,
    },
    /// Extra run `run` of `of` was measured in another mode or under another profile.
    #[error("extra run {run} of {of} was measured in {:?} mode under profile {:?}: onboarding chose {:?} mode, measured under {:?}", .measured.0, .measured.1, .chosen.0, .chosen.1)]
    ExtraOtherwise {
        run: usize,
        of: usize,
        measured: (Mode, String),
        chosen: (Mode, String),
    },
    /// The results were measured under another profile name than the draft's.
    #[error("the results were measured under profile {measured:?}, not {name:?}: onboarding measures under the name it drafts")]
    OtherProfile { measured: String, name: String },
    /// The draft's text that does not load as a profile.
    #[error(transparent)]
    Profile(#[from] crate::error::Error),
    /// Results bless refuses.
    #[error(transparent)]
    Refused(#[from] crate::bless::BlessError),
}
