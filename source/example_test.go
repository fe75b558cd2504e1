package source_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"

	"github.com/filesink/filesink/source"
)

// A pipeline reads records, takes the position at a checkpoint, and after a
// restart resumes from it.
func ExampleOpen() {
	ctx := context.Background()
	src, err := source.Open(ctx, "file://testdata/in", nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(src.Describe())
	rec, err := src.Next(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s %s\n", rec.Origin, rec.Value)
	pos, err := src.Position() // stored in the checkpoint record
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(pos))
	src.Close()

	// After a crash: resume at the checkpoint.
	src, err = source.Open(ctx, "file://testdata/in", pos)
	if err != nil {
		log.Fatal(err)
	}
	defer src.Close()
	for {
		rec, err := src.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s %s\n", rec.Origin, rec.Value)
	}
	// Output:
	// dir testdata/in (2 files)
	// testdata/in/a.txt:1 alpha
	// {"file":"a.txt","offset":6,"line":1,"head":"14d9a2e99c8da9b6","before":{"files":0}}
	// testdata/in/a.txt:2 beta
	// testdata/in/logs/b.txt:1 gamma
	// testdata/in/logs/b.txt:3 delta
}

func ExampleNewGenerator() {
	g, err := source.NewGenerator(source.GenConfig{Count: 3, Seed: 1, Size: 80}, json.RawMessage(`{"next":1}`))
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close()
	for {
		rec, err := g.Next(context.Background())
		if err == io.EOF {
			break
		}
		fmt.Printf("%s %s\n", rec.Origin, rec.Value)
	}
	// Output:
	// gen:1 {"id":1,"key":"k-1","ts":"2026-01-01T00:00:00.001Z","payload":"playdqwchrusmvy"}
	// gen:2 {"id":2,"key":"k-2","ts":"2026-01-01T00:00:00.002Z","payload":"habhlrmmrocypyc"}
}
