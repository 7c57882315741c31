//! Compiles the libibverbs shim (csrc/shim.c) when the `verbs` feature is on.

fn main() {
    println!("cargo:rerun-if-changed=csrc/shim.c");
    #[cfg(feature = "verbs")]
    {
        cc::Build::new()
            .file("csrc/shim.c")
            .warnings(true)
            .compile("metaroce_verbs_shim");
        println!("cargo:rustc-link-lib=ibverbs");
    }
}
