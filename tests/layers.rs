//! tools/check-layers.py, the import-cycle check CI runs: the CLI, the format crate and the
//! shim have no cycle, and the script finds one where there is one.

use std::path::Path;
use std::process::{Command, Output};

/// tools/check-layers.py with `args`, from the repository root.
fn check_layers(args: &[&str]) -> Output {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    Command::new("python3")
        .arg(root.join("tools/check-layers.py"))
        .args(args)
        .current_dir(root)
        .output()
        .expect("python3 runs tools/check-layers.py")
}

#[test]
fn no_crate_has_an_import_cycle() {
    let out = check_layers(&["src", "shim/format/src", "shim/src"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{stdout}");
    assert!(lines[0].starts_with("src: ") && lines[0].ends_with(" 0 import cycle(s)"));
    assert!(lines[1].starts_with("shim/format/src: ") && lines[1].ends_with(" 0 import cycle(s)"));
    assert!(lines[2].starts_with("shim/src: ") && lines[2].ends_with(" 0 import cycle(s)"));
}

/// A crate whose `a` and `b` import each other, through a `use` group and an inline path;
/// its test code, a parent naming its child and a comment close no other cycle.
#[test]
fn an_import_cycle_is_named_with_the_lines_behind_it() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    let files = [
        ("lib.rs", "mod a;\nmod b;\nmod c;\npub use c::leaf::Leaf;\n"),
        (
            "a.rs",
            "use crate::{b::B, c};\npub struct A(B, c::C);\n\
             #[cfg(test)]\nmod tests {\n    use crate::c::leaf::Leaf;\n}\n",
        ),
        (
            "b.rs",
            "pub struct B;\npub fn f() -> crate::a::A {\n    todo!()\n}\n",
        ),
        (
            "c.rs",
            "pub mod leaf;\npub struct C(leaf::Leaf);\n// crate::a::A is not an import\n",
        ),
        (
            "c/leaf.rs",
            "pub struct Leaf;\nfn _uses_its_parent(_: super::C) {}\n",
        ),
    ];
    std::fs::create_dir(src.join("c")).unwrap();
    for (name, text) in files {
        std::fs::write(src.join(name), text).unwrap();
    }
    let path = src.to_str().unwrap();
    let out = check_layers(&[path]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert_eq!(
        stdout,
        format!(
            "{path}: 5 modules, 4 imports, 1 import cycle(s)\n  \
             cycle of 2 modules: crate::a, crate::b\n    \
             crate::a -> crate::b  ({path}/a.rs:1)\n    \
             crate::b -> crate::a  ({path}/b.rs:2)\n"
        )
    );
    // --info reports the same and does not fail.
    let info = check_layers(&["--info", path]);
    assert_eq!(info.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&info.stdout), stdout);
}

/// The root's re-exports of a folder's modules are the module tree: `crate::a` names
/// `crate::layer::a`, so a cycle through the re-exported paths is still found.
#[test]
fn a_cycle_through_root_reexports_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    let files = [
        ("lib.rs", "mod layer;\npub(crate) use layer::{a, b};\n"),
        ("layer/mod.rs", "pub(crate) mod a;\npub(crate) mod b;\n"),
        ("layer/a.rs", "pub fn f() {\n    crate::b::g();\n}\n"),
        (
            "layer/b.rs",
            "use crate::a;\npub fn g() {\n    a::f();\n}\n",
        ),
    ];
    std::fs::create_dir(src.join("layer")).unwrap();
    for (name, text) in files {
        std::fs::write(src.join(name), text).unwrap();
    }
    let path = src.to_str().unwrap();
    let out = check_layers(&[path]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert_eq!(
        stdout,
        format!(
            "{path}: 4 modules, 2 imports, 1 import cycle(s)\n  \
             cycle of 2 modules: crate::layer::a, crate::layer::b\n    \
             crate::layer::a -> crate::layer::b  ({path}/layer/a.rs:2)\n    \
             crate::layer::b -> crate::layer::a  ({path}/layer/b.rs:1)\n"
        )
    );
}
