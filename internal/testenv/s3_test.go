package testenv

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

func TestNewS3StoresAndRefusesStrangers(t *testing.T) {
	s := NewS3(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body := bytes.Repeat([]byte("edl"), 1000)
	key := s.Prefix + "/smoke"
	if _, err := s.Client.PutObject(ctx, s.Bucket, key, bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
		t.Fatalf("put: %v", err)
	}
	obj, err := s.Client.GetObject(ctx, s.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	got, err := io.ReadAll(obj)
	obj.Close()
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("read back %d bytes (err %v), want %d equal bytes", len(got), err, len(body))
	}
	if want := "s3://" + s.Bucket + "/" + s.Prefix; s.URL() != want {
		t.Errorf("URL() = %q, want %q", s.URL(), want)
	}

	stranger, err := minio.New(s.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(s.AccessKey, "wrong-secret", ""), Region: s.Region, MaxRetries: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stranger.BucketExists(ctx, s.Bucket); err == nil {
		t.Errorf("a wrong secret key was accepted")
	}
	anon, err := minio.New(s.Endpoint, &minio.Options{MaxRetries: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := anon.StatObject(ctx, s.Bucket, key, minio.StatObjectOptions{}); err == nil {
		t.Errorf("an anonymous request could read the object")
	}
}

func TestNewS3ServerSurvivesRestart(t *testing.T) {
	s := NewS3Server(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	body := []byte("kept across a restart")
	if _, err := s.Client.PutObject(ctx, s.Bucket, "k", bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
		t.Fatalf("put: %v", err)
	}
	s.Server.Kill()
	if _, err := s.Client.BucketExists(ctx, s.Bucket); err == nil {
		t.Fatalf("killed server still answers")
	}
	if err := s.Server.Restart(ctx); err != nil {
		t.Fatalf("restart: %v", err)
	}
	obj, err := s.Client.GetObject(ctx, s.Bucket, "k", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(obj)
	obj.Close()
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("after restart read %q (err %v), want %q", got, err, body)
	}
}
