//! The generated GPU suite: one case per probe variant and per invariant, from the profile
//! that matches the GPU (see src/suite.rs for the harness contract).

fn main() -> std::process::ExitCode {
    accprobe::harness::main()
}
