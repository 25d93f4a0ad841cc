include!("shim/build_id.rs");

fn main() {
    // The CLI holds its own sources and the format crate's.
    emit_build_id(
        Path::new("."),
        &[
            "src",
            "build.rs",
            "Cargo.toml",
            "shim/build_id.rs",
            "shim/format",
        ],
    );
}
