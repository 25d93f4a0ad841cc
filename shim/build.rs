include!("build_id.rs");

fn main() {
    // The shim holds its own sources and the format crate's, both under shim/.
    emit_build_id(Path::new(".."), &["."]);
    // The variadic exec functions (hot/exec.rs). Nothing in the crate calls them, so the
    // whole archive is linked, and their version script exports them.
    cc::Build::new()
        .file("src/hot/exec_variadic.c")
        .warnings(true)
        .extra_warnings(true)
        .link_lib_modifier("+whole-archive")
        .compile("gpuspy_exec_variadic");
    let exports = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/hot/exec_variadic.map");
    println!(
        "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
        exports.display()
    );
}
