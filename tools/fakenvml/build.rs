// Loaded as the real one is: soname libnvidia-ml.so.1.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libnvidia-ml.so.1");
}
