package main

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/adapters/awsbatch"
	"github.com/jobbridge/jobbridge/adapters/githubactions"
	"github.com/jobbridge/jobbridge/adapters/rest"
	"github.com/jobbridge/jobbridge/catalog"
	"github.com/jobbridge/jobbridge/internal/fakes/githubfake"
)

// backendKind is a backend type this binary knows: how the catalog decodes
// its blocks, how its adapters are built, and how the demo points it at a
// fake. Adding a backend type means adding its adapter package and an entry
// to backendKinds; nothing else names the types.
type backendKind struct {
	catalog.BackendType
	// open returns the function that builds this kind's adapters for one
	// server; what those adapters share lives in its closure.
	open func(o adapterOptions) buildFunc
	// useFakes points a decoded backend config (Backend.Config) at the
	// demo's fakes.
	useFakes func(config any, f demoFakes)
}

// buildFunc builds the adapter of the backend called name from its decoded
// config and the job blocks of its tools by tool name (Backend.Config and
// Tool.Job).
type buildFunc func(name string, config any, jobs map[string]any) (adapters.Adapter, error)

// adapterOptions adjust how adapters are built (the demo hands in static
// AWS credentials for the local Batch fake).
type adapterOptions struct {
	getenv         func(string) (string, bool)
	logger         *slog.Logger
	awsCredentials aws.CredentialsProvider
	// trace, when set, is told each step of the rest adapters' work
	// (`jobbridge try`), with the backend's name; other kinds have no trace.
	trace func(backend string, e rest.Event)
}

// demoFakes are the base URLs of the demo's in-process fakes.
type demoFakes struct {
	jobAPI, batch, github string
	// githubFake sends the GitHub backends' webhooks, once the demo
	// listens (see wireDemoEvents).
	githubFake *githubfake.Server
}

// backendKinds is the one table of backend types, used by serve, demo,
// validate and call.
var backendKinds = []backendKind{
	{
		BackendType: catalog.BackendType{
			Name:      "rest",
			NewConfig: func() catalog.Block { return new(rest.BackendConfig) },
			NewJob:    func() catalog.JobBlock { return new(rest.JobConfig) },
			EnvValues: func(c catalog.Block) []string {
				b := c.(*rest.BackendConfig)
				values := slices.Collect(maps.Values(b.Headers))
				if o := b.OAuth2; o != nil {
					values = append(values, o.ClientID, o.ClientSecret)
				}
				if e := b.Events; e != nil {
					values = append(values, e.Secret)
				}
				return values
			},
		},
		open: func(o adapterOptions) buildFunc {
			return typedBuild(func(name string, b *rest.BackendConfig, jobs map[string]rest.JobConfig) (adapters.Adapter, error) {
				opts := &rest.Options{Logger: o.logger.With("backend", name), Getenv: o.getenv}
				if o.trace != nil {
					opts.Trace = func(e rest.Event) { o.trace(name, e) }
				}
				return rest.New(name, *b, jobs, opts)
			})
		},
		useFakes: func(c any, f demoFakes) {
			b := c.(*rest.BackendConfig)
			b.BaseURL = f.jobAPI
			b.AllowNetworks = []string{"127.0.0.1/32"}
		},
	},
	{
		BackendType: catalog.BackendType{
			Name:      "aws_batch",
			NewConfig: func() catalog.Block { return new(awsbatch.BackendConfig) },
			NewJob:    func() catalog.JobBlock { return new(awsbatch.JobConfig) },
			EnvValues: func(c catalog.Block) []string {
				if e := c.(*awsbatch.BackendConfig).Events; e != nil {
					return []string{e.APIKey}
				}
				return nil
			},
		},
		open: func(o adapterOptions) buildFunc {
			// The server's Batch backends share their DescribeJobs batching.
			pollers := awsbatch.NewPollers()
			return typedBuild(func(name string, b *awsbatch.BackendConfig, jobs map[string]awsbatch.JobConfig) (adapters.Adapter, error) {
				return awsbatch.New(name, *b, jobs, &awsbatch.Options{Logger: o.logger.With("backend", name), Pollers: pollers, Credentials: o.awsCredentials, Getenv: o.getenv})
			})
		},
		useFakes: func(c any, f demoFakes) {
			b := c.(*awsbatch.BackendConfig)
			// No real AWS: no role to assume, no profile to read.
			b.Endpoint = f.batch
			b.AssumeRoleARN, b.Profile = "", ""
		},
	},
	{
		BackendType: catalog.BackendType{
			Name:      "github_actions",
			NewConfig: func() catalog.Block { return new(githubactions.BackendConfig) },
			NewJob:    func() catalog.JobBlock { return new(githubactions.JobConfig) },
			EnvValues: func(c catalog.Block) []string {
				b := c.(*githubactions.BackendConfig)
				values := []string{b.Token}
				if e := b.Events; e != nil {
					values = append(values, e.Secret)
				}
				return values
			},
		},
		open: func(o adapterOptions) buildFunc {
			return typedBuild(func(name string, b *githubactions.BackendConfig, jobs map[string]githubactions.JobConfig) (adapters.Adapter, error) {
				return githubactions.New(name, *b, jobs, &githubactions.Options{Logger: o.logger.With("backend", name), Getenv: o.getenv})
			})
		},
		useFakes: func(c any, f demoFakes) {
			c.(*githubactions.BackendConfig).APIURL = f.github
		},
	},
}

// catalogTypes returns the backend types for catalog.Load.
func catalogTypes() []catalog.BackendType {
	types := make([]catalog.BackendType, len(backendKinds))
	for i, k := range backendKinds {
		types[i] = k.BackendType
	}
	return types
}

// kindOf returns the kind of the backend type called name.
func kindOf(name string) (backendKind, bool) {
	for _, k := range backendKinds {
		if k.Name == name {
			return k, true
		}
	}
	return backendKind{}, false
}

// typedBuild adapts an adapter package's constructor, which takes its own
// config types, to a buildFunc, which gets them as the catalog decoded them
// (*B and *J).
func typedBuild[B, J any](build func(name string, b *B, jobs map[string]J) (adapters.Adapter, error)) buildFunc {
	return func(name string, config any, jobs map[string]any) (adapters.Adapter, error) {
		b, ok := config.(*B)
		if !ok {
			return nil, fmt.Errorf("config is a %T, want a %T", config, b)
		}
		typed := make(map[string]J, len(jobs))
		for tool, j := range jobs {
			job, ok := j.(*J)
			if !ok {
				return nil, fmt.Errorf("tool %q: job is a %T, want a %T", tool, j, job)
			}
			typed[tool] = *job
		}
		return build(name, b, typed)
	}
}
