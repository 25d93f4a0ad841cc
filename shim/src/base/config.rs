//! Every `GPUSPY_*` variable, read once into a frozen `Config`: by the load-time
//! constructor (lifecycle.rs), before the program can `chdir` or change its environment.
//! Nothing else in the shim reads a `GPUSPY_*` variable. (The exec wrappers write two of
//! them, `GPUSPY_IMAGE` and `GPUSPY_OUT`, into the next image's environment, where the
//! program left them as `Config::inherited` says this image found them.) The README
//! documents each variable and its default.

use gpuspy_format::env;
use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

/// Everything the environment says, read once.
#[derive(Debug)]
pub struct Config {
    /// `GPUSPY_OUT`: absolute unless the working directory could not be read at load time.
    pub out_dir: PathBuf,
    /// `GPUSPY_FLUSH_S` (default 10, `gpuspy_format::env` gives each period's range): None
    /// writes at exit only.
    pub flush_every: Option<Duration>,
    /// `GPUSPY_DISABLE` unset or `0`.
    pub enabled: bool,
    /// `GPUSPY_CLOCK=monotonic`.
    pub force_monotonic: bool,
    /// `GPUSPY_RUN_TOKEN`, set by `gpuspy run`; copied into every dump.
    pub run_token: Option<String>,
    /// How many `exec`s of this pid came before this image, and the process's start as the
    /// first image recorded it: `GPUSPY_IMAGE=<pid>:<n>:<start_unix_ns>`, set by the exec
    /// wrappers in the new image's environment, counts only for that pid (a child that
    /// inherits the variable is a first image). Images of one process share the start, so
    /// the reader can tell them for one process; /proc gives it only to 10 ms.
    pub image: Option<Image>,
    /// `GPUSPY_CMDLINE=0`: record the program's name but none of its arguments.
    pub record_args: bool,
    /// `GPUSPY_FSYNC=0`: skip the `fsync` of each dump and its directory.
    pub fsync: bool,
    /// `GPUSPY_NVML_MS` (default 100): NVML sampling period, None when `0` turns NVML off.
    pub nvml_every: Option<Duration>,
    /// `GPUSPY_CUPTI`: `0` off, `full` every record, anything else (unset) sampled.
    pub cupti: CuptiMode,
    /// `GPUSPY_CUPTI_PATH`: a libcupti to load when the process has none.
    pub cupti_path: Option<PathBuf>,
    /// `GPUSPY_PROM_DIR`: where each flush also writes the process's Prometheus textfile
    /// (absolute, like `out_dir`); None writes none.
    pub prom_dir: Option<PathBuf>,
    /// `GPUSPY_HANG_S` (default 300): a call in flight this long is a hang; None when `0`
    /// turns the watchdog off.
    pub hang_after: Option<Duration>,
    /// `GPUSPY_IMAGE` and `GPUSPY_OUT` exactly as this image found them.
    pub inherited: Inherited,
}

/// The variables the exec wrappers set for the next image, as this image's environment
/// had them: a value the program has changed since is its own, and passed on as it is.
#[derive(Debug)]
pub struct Inherited {
    pub image: Option<OsString>,
    pub out: Option<OsString>,
}

impl Config {
    fn from_env() -> Config {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let out_dir = var("GPUSPY_OUT").map_or_else(|| PathBuf::from("gpuspy-out"), PathBuf::from);
        let prom_dir = std::env::var_os("GPUSPY_PROM_DIR")
            .filter(|p| !p.is_empty())
            .map(PathBuf::from);
        let enabled = var("GPUSPY_DISABLE").is_none_or(|v| v == "0");
        let [flush, hang, nvml] = [env::FLUSH_S, env::HANG_S, env::NVML_MS].map(|p| p.from_env());
        if enabled {
            // Read once, so each bad value is said once; a disabled shim says nothing.
            for warning in [&flush, &hang, &nvml]
                .into_iter()
                .filter_map(|r| r.warning.as_ref())
            {
                let _ = writeln!(std::io::stderr(), "gpuspy: {warning}");
            }
        }
        Config {
            prom_dir: prom_dir.map(|d| std::path::absolute(&d).unwrap_or(d)),
            hang_after: hang.period,
            out_dir: std::path::absolute(&out_dir).unwrap_or(out_dir),
            flush_every: flush.period,
            enabled,
            force_monotonic: var("GPUSPY_CLOCK").is_some_and(|v| v == "monotonic"),
            run_token: var("GPUSPY_RUN_TOKEN"),
            image: var("GPUSPY_IMAGE").and_then(|v| image_of(&v, std::process::id())),
            record_args: var("GPUSPY_CMDLINE").is_none_or(|v| v != "0"),
            fsync: var("GPUSPY_FSYNC").is_none_or(|v| v != "0"),
            nvml_every: nvml.period,
            cupti: match var("GPUSPY_CUPTI").as_deref() {
                Some("0") => CuptiMode::Off,
                Some("full") => CuptiMode::Full,
                Some("detach") => CuptiMode::SampledDetaching,
                _ => CuptiMode::Sampled,
            },
            // A path, not text: read as an OsString.
            cupti_path: std::env::var_os("GPUSPY_CUPTI_PATH")
                .filter(|p| !p.is_empty())
                .map(PathBuf::from),
            inherited: Inherited {
                image: std::env::var_os("GPUSPY_IMAGE"),
                out: std::env::var_os("GPUSPY_OUT"),
            },
        }
    }
}

/// How much CUPTI activity the shim records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CuptiMode {
    Off,
    /// Activity kinds on in duty cycles sized to CUPTI's cost (gpu/sampling.rs), CUPTI
    /// attached from its start to the end.
    Sampled,
    /// Duty cycles that also detach CUPTI (`cuptiFinalize`) between slots where that is
    /// cheaper: less cost per launch, but `cuptiFinalize` races with the CUDA calls of the
    /// program's other threads (docs/overhead.md, "Detaching between slots").
    SampledDetaching,
    /// Every record, for the whole run.
    Full,
}

/// An image after `exec`: its number and the process's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Image {
    pub number: u32,
    pub start_unix_ns: u64,
}

/// The image in a `GPUSPY_IMAGE` value, if it was set for process `pid`.
fn image_of(value: &str, pid: u32) -> Option<Image> {
    let mut parts = value.split(':');
    let for_pid: u32 = parts.next()?.parse().ok()?;
    let number = parts.next()?.parse().ok()?;
    let start_unix_ns = parts.next()?.parse().ok()?;
    (for_pid == pid && parts.next().is_none()).then_some(Image {
        number,
        start_unix_ns,
    })
}

static CONFIG: OnceLock<Config> = OnceLock::new();

/// The configuration, once loaded (None before the load-time constructor, and in unit
/// tests until something loads it).
pub fn config() -> Option<&'static Config> {
    CONFIG.get()
}

/// Reads the environment the first time; afterwards the same frozen values.
pub fn load() -> &'static Config {
    CONFIG.get_or_init(Config::from_env)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_number_counts_only_for_its_own_pid() {
        let image = Image {
            number: 3,
            start_unix_ns: 1_000,
        };
        assert_eq!(image_of("42:3:1000", 42), Some(image));
        assert_eq!(image_of("42:3:1000", 43), None);
        assert_eq!(image_of("42:3", 42), None);
        assert_eq!(image_of("42:x:1000", 42), None);
        assert_eq!(image_of("42:3:1000:9", 42), None);
    }
}
