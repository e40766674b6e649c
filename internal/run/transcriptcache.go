package run

// transcriptCacheBytes bounds the transcripts kept (about: the bytes of
// their texts and a little per entry).
const transcriptCacheBytes = 32 << 20

// The transcripts of finished runs are kept by run id in an lru.Cache
// (Service.transcripts): a finished run's log takes no more chunks
// (AppendLog refuses them), so its transcript never changes and is parsed
// once.

// transcriptSize is about the bytes p holds: the transcript cache's
// measure.
func transcriptSize(p TranscriptPage) int {
	n := 64
	for _, e := range p.Entries {
		n += 128 + len(e.Text) + len(e.Tool) + len(e.ID) + len(e.Input) + len(e.Outcome) + len(e.Model)
	}
	return n
}
