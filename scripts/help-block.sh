# help-block.sh — sourced by render-docs.sh (which writes the docs' usage blocks) and
# check-help-blocks.sh (which checks them): the one definition of a usage block.
# help_re matches the opening marker `<!-- help: CMD -->`; `<!-- /help -->` closes it.
help_re='^<!-- help: ([a-z]+) -->$'

# help_block KDFLOW CMD: the block's text — `$ kdflow CMD --help` and the binary's output as a
# text block, the binary's path in the "Usage:" line as plain `kdflow` and the --jobs default
# (the machine's cores) as `(cores)`, so the docs do not depend on where or on what it runs.
help_block() {
  echo '```text'
  echo "\$ kdflow $2 --help"
  NO_COLOR=1 COLUMNS=120 "$1" "$2" --help </dev/null | sed -e "s#^Usage: [^ ]*kdflow #Usage: kdflow #" -E -e "s#(--jobs INT:INT in \\[1 - 256\\])=[0-9]+#\\1=(cores)#"
  echo '```'
}
