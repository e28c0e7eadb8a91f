//! What the unit tests of the configuration share: parsing a command line and walking the command tree.

use clap::Parser;

use super::Cli;

pub(super) fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
    Cli::try_parse_from(std::iter::once("approval-resume").chain(args.iter().copied()))
}

/// Every command and subcommand, by its path of names (`["clients", "add"]`), with its clap definition.
pub(super) fn every_command() -> Vec<(Vec<String>, clap::Command)> {
    fn walk(
        path: Vec<String>,
        command: clap::Command,
        into: &mut Vec<(Vec<String>, clap::Command)>,
    ) {
        for sub in command.get_subcommands() {
            let mut sub_path = path.clone();
            sub_path.push(sub.get_name().to_owned());
            walk(sub_path, sub.clone(), into);
        }
        into.push((path, command));
    }
    use clap::CommandFactory;
    let mut all = Vec::new();
    let mut root = Cli::command();
    root.build();
    walk(Vec::new(), root, &mut all);
    all
}
