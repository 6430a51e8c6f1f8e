package core

import (
	"testing"

	"github.com/edl-nomad/edl/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }
