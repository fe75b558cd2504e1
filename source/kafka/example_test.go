package kafka_test

import (
	"fmt"

	"github.com/filesink/filesink/source/kafka"
)

func ExampleParseURI() {
	cfg, err := kafka.ParseURI("kafka://alice:s3cret@k1:9092,k2:9092/orders,refunds?partitions=0,1&start=latest&bounded=true&sasl=scram-sha-256")
	if err != nil {
		panic(err)
	}
	fmt.Println(cfg.Brokers, cfg.Topics, cfg.Partitions, cfg.Start, cfg.Bounded)
	fmt.Println(cfg.SASL.Mechanism, cfg.SASL.User, cfg.SASL.Password)

	_, err = kafka.ParseURI("kafka://alice:s3cret@k1:9092/orders?start=tomorrow&sasl=plain")
	fmt.Println(err)
	// Output:
	// [k1:9092 k2:9092] [orders refunds] [0 1] latest true
	// SCRAM-SHA-256 alice REDACTED
	// source: bad source URI: "kafka://alice:REDACTED@k1:9092/orders?start=tomorrow&sasl=plain": start "tomorrow": want earliest, latest, an RFC 3339 time such as 2026-01-02T15:04:05Z, or Unix milliseconds (want kafka://HOST:PORT[,HOST:PORT]/TOPIC[,TOPIC][?partitions=...&start=...&bounded=true])
}
