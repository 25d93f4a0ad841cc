// Loaded as the real one is: soname libcupti.so.13.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libcupti.so.13");
}
