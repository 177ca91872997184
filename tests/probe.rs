//! The generated GPU suite: one case per probe variant and per invariant, from the profile
//! that matches the GPU (the harness is `src/harness/`; its contract is docs/harness.md).

fn main() -> std::process::ExitCode {
    accprobe::harness::main()
}
