package ebpf

// The BPF objects are generated and committed, so building needs no clang.
// Regenerate with `make generate` (or go generate ./dataplane/ebpf); the
// output is reproducible byte for byte with the same clang and llvm-strip.
//
// bpf/include/intd_spec.h holds the constants C shares with Go (sai/spec's
// tables, report.Kind). The program's own flags, indexes and sizes that Go
// also uses are named C enums, which -type turns into Go constants
// (intd<Enum><NAME>, e.g. intdCfgFlagF_DTEL).
//go:generate go run ./internal/spech bpf/include/intd_spec.h
//go:generate go tool bpf2go -cc clang -cflags "-O2 -mcpu=v3 -g -Wall -Werror -Ibpf/include" -target bpfel -type cfg -type iface -type session -type wl_entry -type flow_key -type wl_cache -type wl_lpm_key -type counters -type sess_stats -type tel_key -type wl_stats -type qr_cfg -type qr_state -type sojourn -type event -type limit -type cfg_flag -type wl_act -type flow_op -type sess_mode -type event_flag -type counter -type wl_set -type drop_map -type wl_use -type step intd bpf/intd.c
//
// The floor programs of BenchmarkProgram (test only).
//go:generate go tool bpf2go -cc clang -cflags "-O2 -mcpu=v3 -g -Wall -Werror -Ibpf/include" -target bpfel -output-suffix _test floor bpf/floor.c
//
// Transits without the general program around them, for BenchmarkProgram
// (test only).
//go:generate go tool bpf2go -cc clang -cflags "-O2 -mcpu=v3 -g -Wall -Werror -Ibpf/include" -target bpfel -output-suffix _test lean bpf/lean.c
