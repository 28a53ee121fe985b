package queue

import "context"

// PublishRound runs one round of p's publisher (tests set a long
// PublishInterval and drive it) and returns how many statements it ran.
func PublishRound(p *Processor) int {
	n, _ := p.round(context.Background())
	return n
}
