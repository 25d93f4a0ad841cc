// Loaded as the real one is: soname libnccl.so.2.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libnccl.so.2");
}
