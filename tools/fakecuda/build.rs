// The fake must be found and loaded as the real driver is: soname libcuda.so.1.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libcuda.so.1");
}
