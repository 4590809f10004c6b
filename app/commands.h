/* The subcommands of the brigade program: each parses its own arguments and
 * returns the process exit status. */
#ifndef BRIGADE_COMMANDS_H
#define BRIGADE_COMMANDS_H

int cmd_info(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_fit(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);

#endif
