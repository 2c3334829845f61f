fn main() -> std::process::ExitCode {
    isobench::cli::main()
}
