package migration

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

func TestLoad(t *testing.T) {
	sql := &fstest.MapFile{Data: []byte("CREATE TABLE t (x INTEGER);")}
	tests := []struct {
		name    string
		fsys    fstest.MapFS
		want    []int
		wantErr string
	}{
		{"in version order", fstest.MapFS{"m/0002_b.sql": sql, "m/0001_a.sql": sql, "m/0010_c.sql": sql}, []int{1, 2, 10}, ""},
		{"missing version", fstest.MapFS{"m/tasks.sql": sql}, nil, "not NNNN_description.sql"},
		{"not sql", fstest.MapFS{"m/0001_a.txt": sql}, nil, "not NNNN_description.sql"},
		{"non-numeric version", fstest.MapFS{"m/v1_tasks.sql": sql}, nil, "not a positive integer"},
		{"zero version", fstest.MapFS{"m/0000_tasks.sql": sql}, nil, "not a positive integer"},
		{"duplicate version", fstest.MapFS{"m/0001_a.sql": sql, "m/1_b.sql": sql}, nil, "does not follow"},
		{"none", fstest.MapFS{"m/.keep": &fstest.MapFile{}}, nil, "not NNNN_description.sql"},
		{"no directory", fstest.MapFS{}, nil, "reading migrations"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			steps, err := Load(tc.fsys, "m")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Load = %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, s := range steps {
				got = append(got, s.Version)
				if s.SQL != string(sql.Data) {
					t.Errorf("step %s: SQL %q", s.Name, s.SQL)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("versions mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
