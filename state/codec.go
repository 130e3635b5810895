package state

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// From format 4 the attempt records and the input groups are stored
// compressed: each value is one zstd frame of the JSON the earlier formats
// stored as is, compressed against a fixed dictionary (recordDict) of what
// those values repeat: field names, statuses, input paths, "sha256:".
// Most of what is left is fingerprints and hashes. At 100,000 attempts
// recorded as apply records them an attempt record goes from 1,172 bytes
// to about 480 and an input group from 712 to about 200; compressing one
// takes a few microseconds, reading one back less.
//
// The JSON inside is unchanged, so a group is still named by the SHA-256
// of its JSON (not of its stored bytes), and a value that does not start
// with zstd's magic number is read as the plain JSON of format 3 and
// before: the migrations from older formats read those.
//
// The dictionary is part of the format: a store's frames can only be read
// with the one they were written with (its id is in every frame), so a
// change to it is a new format with a migration.

// recordDictID is the dictionary id written in every frame.
const recordDictID = 1

// recordDict is the raw content dictionary of format 4: zstd finds
// matches in it as if it came before each value. Nearer its end costs
// less, so the most common text is last.
var recordDict = []byte(`` +
	// Outcome and manifest fields rarer in nop runs, commands and logs.
	`"steps":[{"name":"","verifier_mode":"shared","verify_fingerprint":"","verifier_settings":{}}],` +
	`"task_problem":"","reused_agent_from":"","agent_timed_out":true,"error_stage":"verify","error":"",` +
	`"reward_details":{},"judges":{"":{"score":0,"model":"","calls":1,"input_tokens":0,"output_tokens":0,"cost_usd":0}},` +
	`"mcp":[{"name":"","calls":0,"errors":0}],"logs":[{"path":"verifier/reward.json","size":0,"sha256":""}],` +
	`"artifacts":[{"path":"","size":0,"sha256":""}],` +
	`"commands":[{"stage":"agent","name":"solution/solve.sh","exit":0,"stdout":{"blob":"","size":0},"stderr":{"blob":"","size":0}},` +
	`{"stage":"verify","name":"tests/test.sh","exit":0,"timed_out":true}],` +
	`"agent_exit":0,"agent_result":{},"usage":{"input_tokens":0,"output_tokens":0,"cost_usd":0},` +
	`"stderr_tail":"","events_log":"events/.jsonl","event_count":0,` +
	`"origin":{"format":"harbor","job":"","job_id":"","trial":"","trial_id":"","source":"","imported_at":""},` +
	// Input groups and context groups.
	`{"sandbox":{"kind":"docker","settings":{"kind":"docker","network":"none"},"loosenings":[],"required":["network_block"],"offered":["network_block"]},` +
	`"images":{"":"sha256:"},"env_names":["OPENAI_API_KEY","ANTHROPIC_API_KEY"]}` +
	`[{"stage":"agent","path":"attempt.repetition","value":"1"},{"stage":"agent","path":"hemra.execution_semantics","value":"\"1\""},` +
	`{"stage":"agent","path":"harness.args.model","value":"\""},{"stage":"agent","path":"harness.command","value":"[\""},` +
	`{"stage":"agent","path":"image ubuntu:24.04","value":"sha256:"},{"stage":"agent","path":"mount /harness/","value":"sha256:","blob":""},` +
	`{"stage":"agent","path":"sandbox.kind","value":"\"docker\""},{"stage":"agent","path":"sandbox.network","value":"\"none\""},` +
	`{"stage":"verify","path":"verifier.network","value":"\"none\""},{"stage":"judge","path":"judge.","value":""},` +
	`{"stage":"verify","path":"task.tests/test.sh","value":"sha256:","blob":""},` +
	`{"stage":"agent","path":"task.environment/Dockerfile","value":"sha256:","blob":""},` +
	`{"stage":"agent","path":"task.image ","value":"sha256:"},` +
	`{"stage":"agent","path":"task.instruction.md","value":"sha256:","blob":""},` +
	`{"stage":"agent","path":"task.solution/solve.sh","value":"sha256:","blob":""},` +
	`{"stage":"agent","path":"task.toml.agent.timeout_sec","value":"600"},` +
	`{"stage":"agent","path":"task.toml.environment.build_timeout_sec","value":"600"},` +
	`{"stage":"agent","path":"task.toml.environment.cpus","value":"1"},` +
	`{"stage":"agent","path":"task.toml.environment.memory_mb","value":"2048"},` +
	`{"stage":"agent","path":"task.toml.environment.storage_mb","value":"10240"},` +
	`{"stage":"verify","path":"task.toml.verifier.timeout_sec","value":"600"}]` +
	// An attempt record, as apply leaves it.
	`{"id":"","address":"","run_id":"","transitions":[{"status":"pending","at":"2026-01-01T00:00:00.000000000Z"},` +
	`{"status":"agent","at":"2026-01-01T00:00:00.000000000Z"},{"status":"verify","at":"2026-01-01T00:00:00.000000000Z"},` +
	`{"status":"judge","at":"2026-01-01T00:00:00.000000000Z"},{"status":"errored","at":"","note":""},` +
	`{"status":"finished","at":"2026-01-01T00:00:00.000000000Z"}],` +
	`"outcome":{"class":"task_failure","reward":0,"rewards":{"reward":1},"started_at":"2026-01-01T00:00:00.000000000Z","finished_at":"2026-01-01T00:00:00.000000000Z","snapshot":""},` +
	`"outcome":{"class":"passed","reward":1,"started_at":"2026-01-01T00:00:00Z","finished_at":"2026-01-01T00:00:00Z","snapshot":"sha256:"},` +
	`"manifest":{"format_version":1,"eval":"","harness":"","task":"","repetition":1,` +
	`"agent_fingerprint":"","verify_fingerprint":"","judge_fingerprint":"","inputs":null,"sandbox":{"kind":""},` +
	`"verifier_mode":"snapshot","input_groups":["","","","",""],"context":"","chained":true}}`)

// maxPacked is the largest JSON packValue compresses; a bigger one
// (no record hemra writes comes near) is kept as plain JSON. It bounds
// what unpackValue allocates for a damaged frame that claims more.
const maxPacked = 64 << 20

// zstdMagic starts every zstd frame; JSON never does.
var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

var codec struct {
	once sync.Once
	enc  *zstd.Encoder
	dec  *zstd.Decoder
	err  error
}

func initCodec() {
	codec.once.Do(func() {
		// The frames are small and written whole: one segment, no
		// checksum (a damaged value fails to decode or to parse as
		// JSON), as little memory per encoder as zstd allows.
		codec.enc, codec.err = zstd.NewWriter(nil,
			zstd.WithEncoderLevel(zstd.SpeedFastest),
			zstd.WithEncoderDictRaw(recordDictID, recordDict),
			zstd.WithEncoderCRC(false),
			zstd.WithSingleSegment(true),
			zstd.WithLowerEncoderMem(true))
		if codec.err != nil {
			return
		}
		codec.dec, codec.err = zstd.NewReader(nil,
			zstd.WithDecoderDictRaw(recordDictID, recordDict),
			zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxMemory(maxPacked))
	})
}

// packValue is the stored form of a record's or a group's JSON.
func packValue(data []byte) []byte {
	initCodec()
	if codec.err != nil || len(data) > maxPacked {
		// The options are fixed: the codec cannot fail at run time. Kept
		// as JSON, the value still reads back.
		return data
	}
	return codec.enc.EncodeAll(data, make([]byte, 0, len(data)/2+16))
}

// unpackValue is the JSON of a stored value: decompressed (format 4), or
// the value itself (plain JSON, format 3 and before), which is only valid
// as long as val is.
func unpackValue(val []byte) ([]byte, error) {
	if !packed(val) {
		return val, nil
	}
	initCodec()
	if codec.err != nil {
		return nil, codec.err
	}
	out, err := codec.dec.DecodeAll(val, nil)
	if err != nil {
		return nil, fmt.Errorf("decompressing: %w", err)
	}
	return out, nil
}

// packed reports whether a stored value is compressed (format 4).
func packed(val []byte) bool { return bytes.HasPrefix(val, zstdMagic) }
