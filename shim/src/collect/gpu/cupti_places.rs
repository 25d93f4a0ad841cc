//! Where a process that has no libcupti loaded could get one: the places its framework
//! could load one from. A CuPy or JAX process loads none until it profiles, yet its Python
//! environment usually holds the `nvidia-cuda-cupti` wheel PyTorch uses, or a toolkit sits
//! in /usr/local. `places` orders the places from what the process shows (its loaded
//! objects, its environment, its executable) and reads nothing; `folders` and `ranked`
//! turn a place into the files to try. Cold code, run once on gpuspy's thread.

use std::path::{Path, PathBuf};

/// The sonames gpuspy knows the record layouts of (`layout_known`), newest first.
pub const SONAMES: [&str; 3] = ["libcupti.so.13", "libcupti.so.12", "libcupti.so"];

/// What the search knows of the process.
#[derive(Debug, Default)]
pub struct Process {
    /// The loaded objects' paths, in load order.
    pub loaded: Vec<PathBuf>,
    /// `VIRTUAL_ENV`, `CONDA_PREFIX`, `CUDA_HOME`, `CUDA_PATH` (None when unset or empty).
    pub virtual_env: Option<PathBuf>,
    pub conda_prefix: Option<PathBuf>,
    pub cuda_home: Option<PathBuf>,
    pub cuda_path: Option<PathBuf>,
    /// The executable (`/proc/self/exe`).
    pub exe: Option<PathBuf>,
}

/// A place to look for libcupti.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// The folder of the loaded libcudart, and where the toolkit (`lib64` ->
    /// `extras/CUPTI/lib64`) and the CUDA 12 wheels (`cuda_runtime/lib` -> `cuda_cupti/lib`)
    /// keep CUPTI from there.
    BesideCudart(PathBuf),
    /// A site-packages folder: each `nvidia/*/lib` below it, the CUDA wheels' layouts
    /// (`nvidia/cuda_cupti/lib`, and CUDA 13's shared `nvidia/cu13/lib`).
    Wheels(PathBuf),
    /// An environment's prefix (a virtualenv, a conda environment, an interpreter's
    /// installation): its `lib/` (conda's CUDA packages) and the wheels of each
    /// `lib/python3*/site-packages`.
    Prefix(PathBuf),
    /// A CUDA toolkit: `extras/CUPTI/lib64` and each `targets/*/lib`.
    Toolkit(PathBuf),
    /// Every `cuda*` toolkit in this folder.
    Toolkits(PathBuf),
    /// `dlopen` of the bare sonames: `LD_LIBRARY_PATH`, the loader's cache, the system's
    /// folders.
    Loader,
}

/// The places to look, in order: beside the loaded libcudart; the site-packages of the
/// loaded extension modules (the environment the process runs in), `VIRTUAL_ENV`,
/// `CONDA_PREFIX`, the interpreter's installation (from its standard library's loaded
/// modules, libpython, or its executable); `CUDA_HOME`, `CUDA_PATH`; `/usr/local/cuda*`;
/// the loader. Each place once.
pub fn places(p: &Process) -> Vec<Place> {
    let mut out = Vec::new();
    let cudart = p
        .loaded
        .iter()
        .find(|o| file_name(o).contains("libcudart.so"));
    if let Some(dir) = cudart.and_then(|o| o.parent()) {
        out.push(Place::BesideCudart(dir.to_path_buf()));
    }
    let (wheels, installations): (Vec<Place>, Vec<Place>) = p
        .loaded
        .iter()
        .filter_map(|o| python_place(o))
        .partition(|place| matches!(place, Place::Wheels(_)));
    out.extend(wheels);
    out.extend(
        p.virtual_env
            .iter()
            .chain(&p.conda_prefix)
            .cloned()
            .map(Place::Prefix),
    );
    out.extend(installations);
    if let Some(prefix) = p.exe.as_deref().and_then(interpreter_prefix) {
        out.push(Place::Prefix(prefix));
    }
    out.extend(
        p.cuda_home
            .iter()
            .chain(&p.cuda_path)
            .cloned()
            .map(Place::Toolkit),
    );
    out.push(Place::Toolkits("/usr/local".into()));
    out.push(Place::Loader);
    let mut seen = Vec::with_capacity(out.len());
    out.retain(|place| {
        let new = !seen.contains(place);
        if new {
            seen.push(place.clone());
        }
        new
    });
    out
}

/// The Python place a loaded object shows: the site-packages it sits in (an extension
/// module, a wheel's library), or the prefix of a `lib/python3.X/` it sits in (the standard
/// library's `lib-dynload`) or of the `lib/` holding libpython.
fn python_place(object: &Path) -> Option<Place> {
    let mut prefix = PathBuf::new();
    let mut components = object.parent()?.components().peekable();
    while let Some(c) = components.next() {
        let name = c.as_os_str().to_string_lossy();
        prefix.push(c);
        if name == "site-packages" || name == "dist-packages" {
            return Some(Place::Wheels(prefix));
        }
        let next = components.peek().map(|n| n.as_os_str().to_string_lossy());
        if name == "lib" && next.is_some_and(|n| n.starts_with("python3")) {
            // Keep looking: a site-packages below this prefix says more.
            let rest: PathBuf = components.clone().collect();
            if rest.components().any(|c| {
                let c = c.as_os_str();
                c == "site-packages" || c == "dist-packages"
            }) {
                continue;
            }
            return prefix.parent().map(|p| Place::Prefix(p.to_path_buf()));
        }
    }
    let lib = object.parent()?;
    if !file_name(object).starts_with("libpython3") || lib.file_name()? != "lib" {
        return None;
    }
    Some(Place::Prefix(lib.parent()?.to_path_buf()))
}

/// `PREFIX/bin/python3.12` -> `PREFIX`.
fn interpreter_prefix(exe: &Path) -> Option<PathBuf> {
    let bin = exe.parent()?;
    if !file_name(exe).starts_with("python") || bin.file_name()? != "bin" {
        return None;
    }
    bin.parent().map(Path::to_path_buf)
}

fn file_name(path: &Path) -> std::borrow::Cow<'_, str> {
    path.file_name().unwrap_or_default().to_string_lossy()
}

/// What the note of a search that found nothing says of a place.
pub fn describe(place: &Place) -> String {
    match place {
        Place::BesideCudart(dir) => format!("beside libcudart ({})", dir.display()),
        Place::Wheels(dir) => format!("the CUDA wheels in {}", dir.display()),
        Place::Prefix(dir) => format!("the environment {}", dir.display()),
        Place::Toolkit(dir) => format!("the toolkit {}", dir.display()),
        Place::Toolkits(dir) => format!("{}", dir.join("cuda*").display()),
        Place::Loader => "the loader's search path".into(),
    }
}

/// The folders a place stands for, read from the file system (none for `Loader`).
pub fn folders(place: &Place) -> Vec<PathBuf> {
    match place {
        Place::BesideCudart(dir) => vec![
            dir.clone(),
            dir.join("../extras/CUPTI/lib64"),
            dir.join("../../cuda_cupti/lib"),
        ],
        Place::Wheels(site) => entries(&site.join("nvidia"), |_| true)
            .into_iter()
            .map(|d| d.join("lib"))
            .collect(),
        Place::Prefix(prefix) => {
            let lib = prefix.join("lib");
            let mut out = vec![lib.clone()];
            for python in entries(&lib, |n| n.starts_with("python3")) {
                out.extend(folders(&Place::Wheels(python.join("site-packages"))));
            }
            out
        }
        Place::Toolkit(root) => {
            let mut out = vec![root.join("extras/CUPTI/lib64")];
            out.extend(
                entries(&root.join("targets"), |_| true)
                    .into_iter()
                    .map(|t| t.join("lib")),
            );
            out
        }
        Place::Toolkits(dir) => {
            // `cuda` (the default's link) first, then the newest version.
            let mut toolkits = entries(dir, |n| n.starts_with("cuda"));
            toolkits.sort_by_key(|t| (file_name(t) != "cuda", std::cmp::Reverse(t.clone())));
            toolkits
                .iter()
                .flat_map(|t| folders(&Place::Toolkit(t.clone())))
                .collect()
        }
        Place::Loader => Vec::new(),
    }
}

/// The entries of `dir` whose names pass `keep`, sorted; none if it cannot be read.
fn entries(dir: &Path, keep: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = read
        .flatten()
        .map(|e| e.path())
        .filter(|p| keep(&file_name(p)))
        .collect();
    out.sort();
    out
}

/// The libcupti file names among `names`, in the order to try them: the newest major
/// version the driver supports first (a CUPTI newer than the driver cannot attach:
/// libcupti.so.13 needs a CUDA 13 driver), the unversioned link last. `driver_major`:
/// the driver's CUDA major version, None when unknown (then no version is ruled out).
pub fn ranked(names: impl IntoIterator<Item = String>, driver_major: Option<u32>) -> Vec<String> {
    let mut found: Vec<(Option<u32>, String)> = names
        .into_iter()
        .filter_map(|n| {
            let version = n.strip_prefix("libcupti.so")?;
            let major = match version {
                "" => None,
                v => Some(
                    v.strip_prefix('.')?
                        .split('.')
                        .next()?
                        .parse::<u32>()
                        .ok()?,
                ),
            };
            let usable = match (major, driver_major) {
                (Some(m), Some(d)) => m <= d,
                _ => true,
            };
            usable.then_some((major, n))
        })
        .collect();
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    found.into_iter().map(|(_, n)| n).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(v: &[&str]) -> Vec<PathBuf> {
        v.iter().map(PathBuf::from).collect()
    }

    #[test]
    fn a_cupy_process_in_a_venv_is_searched_in_its_site_packages_first() {
        // CuPy links libcudart statically: no libcudart is loaded, its extension modules are.
        let p = Process {
            loaded: paths(&[
                "/usr/bin/python3.12",
                "/usr/lib/x86_64-linux-gnu/libc.so.6",
                "/usr/lib/python3.12/lib-dynload/_ssl.cpython-312-x86_64-linux-gnu.so",
                "/opt/torch/.venv/lib/python3.12/site-packages/numpy/_core/_multiarray_umath.cpython-312-x86_64-linux-gnu.so",
                "/opt/torch/.venv/lib/python3.12/site-packages/cupy/_core/core.cpython-312-x86_64-linux-gnu.so",
            ]),
            virtual_env: Some("/opt/torch/.venv".into()),
            exe: Some("/usr/bin/python3.12".into()),
            ..Process::default()
        };
        assert_eq!(
            places(&p),
            vec![
                Place::Wheels("/opt/torch/.venv/lib/python3.12/site-packages".into()),
                Place::Prefix("/opt/torch/.venv".into()),
                Place::Prefix("/usr".into()),
                Place::Toolkits("/usr/local".into()),
                Place::Loader,
            ]
        );
    }

    #[test]
    fn libcudart_comes_first_then_conda_the_interpreter_and_the_toolkits() {
        let p = Process {
            loaded: paths(&[
                "/opt/conda/lib/libpython3.11.so.1.0",
                "/opt/conda/lib/python3.11/site-packages/nvidia/cu13/lib/libcudart.so.13",
                "/opt/conda/lib/python3.11/site-packages/jaxlib/xla_extension.so",
            ]),
            conda_prefix: Some("/opt/conda".into()),
            cuda_home: Some("/usr/local/cuda-13.0".into()),
            cuda_path: Some("/usr/local/cuda-13.0".into()),
            exe: Some("/opt/conda/bin/python3.11".into()),
            ..Process::default()
        };
        assert_eq!(
            places(&p),
            vec![
                Place::BesideCudart(
                    "/opt/conda/lib/python3.11/site-packages/nvidia/cu13/lib".into()
                ),
                Place::Wheels("/opt/conda/lib/python3.11/site-packages".into()),
                Place::Prefix("/opt/conda".into()),
                Place::Toolkit("/usr/local/cuda-13.0".into()),
                Place::Toolkits("/usr/local".into()),
                Place::Loader,
            ]
        );
    }

    #[test]
    fn a_process_that_shows_nothing_still_tries_the_toolkits_and_the_loader() {
        let p = Process {
            exe: Some("/work/a.out".into()),
            ..Process::default()
        };
        assert_eq!(
            places(&p),
            vec![Place::Toolkits("/usr/local".into()), Place::Loader]
        );
        assert_eq!(describe(&places(&p)[0]), "/usr/local/cuda*");
    }

    #[test]
    fn debian_dist_packages_and_a_venv_interpreter_are_python_places() {
        let p = Process {
            loaded: paths(&["/usr/lib/python3/dist-packages/cupy/_core/core.so"]),
            exe: Some("/srv/env/bin/python".into()),
            ..Process::default()
        };
        assert_eq!(
            places(&p)[..2],
            [
                Place::Wheels("/usr/lib/python3/dist-packages".into()),
                Place::Prefix("/srv/env".into()),
            ]
        );
    }

    #[test]
    fn the_newest_cupti_the_driver_supports_is_tried_first() {
        let names = [
            "libcupti.so",
            "libcupti.so.12",
            "libcupti.so.13",
            "libcupti.so.13.0.85",
            "libcupti_static.a",
            "libnvperf_host.so",
            "libcupti.so.14",
        ]
        .map(String::from);
        assert_eq!(
            ranked(names.clone(), Some(13)),
            [
                "libcupti.so.13",
                "libcupti.so.13.0.85",
                "libcupti.so.12",
                "libcupti.so"
            ]
        );
        // A CUDA 12 driver cannot run CUPTI 13.
        assert_eq!(
            ranked(names.clone(), Some(12)),
            ["libcupti.so.12", "libcupti.so"]
        );
        assert_eq!(ranked(names, None)[0], "libcupti.so.14");
    }

    #[test]
    fn wheels_and_toolkits_expand_to_their_cupti_folders() {
        let root = std::env::temp_dir().join(format!("gpuspy-cupti-places-{}", std::process::id()));
        let r = root.as_path();
        for dir in [
            "site/nvidia/cu13/lib",
            "site/nvidia/cuda_cupti/lib",
            "cuda-12.8/targets/x86_64-linux/lib",
            "cuda-13.0/extras/CUPTI/lib64",
            "cuda/extras/CUPTI/lib64",
            "env/lib/python3.12/site-packages/nvidia/cuda_cupti/lib",
        ] {
            std::fs::create_dir_all(r.join(dir)).unwrap();
        }
        assert_eq!(
            folders(&Place::Wheels(r.join("site"))),
            [
                r.join("site/nvidia/cu13/lib"),
                r.join("site/nvidia/cuda_cupti/lib")
            ]
        );
        assert_eq!(
            folders(&Place::Prefix(r.join("env"))),
            [
                r.join("env/lib"),
                r.join("env/lib/python3.12/site-packages/nvidia/cuda_cupti/lib")
            ]
        );
        assert_eq!(
            folders(&Place::Toolkits(r.to_path_buf())),
            [
                r.join("cuda/extras/CUPTI/lib64"),
                r.join("cuda-13.0/extras/CUPTI/lib64"),
                r.join("cuda-12.8/extras/CUPTI/lib64"),
                r.join("cuda-12.8/targets/x86_64-linux/lib"),
            ]
        );
        std::fs::remove_dir_all(r).unwrap();
    }
}
