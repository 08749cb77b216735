package batchfake

// The restJson1 shapes of the operations the fake serves, with the field
// names the AWS SDK sends and expects.

type keyValue struct {
	Name  *string `json:"name,omitempty"`
	Value *string `json:"value,omitempty"`
}

type resourceRequirement struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

type dependency struct {
	JobID string `json:"jobId"`
	Type  string `json:"type,omitempty"`
}

type submitJobInput struct {
	JobName            *string            `json:"jobName"`
	JobQueue           *string            `json:"jobQueue"`
	JobDefinition      *string            `json:"jobDefinition"`
	Parameters         map[string]string  `json:"parameters"`
	ContainerOverrides *containerOverride `json:"containerOverrides"`
	ArrayProperties    *struct {
		Size *int `json:"size"`
	} `json:"arrayProperties"`
	DependsOn     []dependency `json:"dependsOn"`
	RetryStrategy *struct {
		Attempts *int `json:"attempts"`
	} `json:"retryStrategy"`
	Timeout *struct {
		AttemptDurationSeconds *int `json:"attemptDurationSeconds"`
	} `json:"timeout"`
	Tags                       map[string]string `json:"tags"`
	PropagateTags              *bool             `json:"propagateTags"`
	ShareIdentifier            *string           `json:"shareIdentifier"`
	SchedulingPriorityOverride *int32            `json:"schedulingPriorityOverride"`
}

type containerOverride struct {
	Command              []string              `json:"command"`
	Environment          []keyValue            `json:"environment"`
	ResourceRequirements []resourceRequirement `json:"resourceRequirements"`
	Vcpus                *int                  `json:"vcpus"`
	Memory               *int                  `json:"memory"`
}

type submitJobOutput struct {
	JobID   string `json:"jobId"`
	JobName string `json:"jobName"`
	JobArn  string `json:"jobArn"`
}

type describeJobsInput struct {
	Jobs []string `json:"jobs"`
}

type describeJobsOutput struct {
	Jobs []jobDetail `json:"jobs"`
}

type jobDetail struct {
	JobID              string            `json:"jobId"`
	JobName            string            `json:"jobName"`
	JobArn             string            `json:"jobArn"`
	JobQueue           string            `json:"jobQueue"`
	JobDefinition      string            `json:"jobDefinition"`
	Status             string            `json:"status"`
	StatusReason       string            `json:"statusReason,omitempty"`
	CreatedAt          int64             `json:"createdAt"`
	StartedAt          int64             `json:"startedAt,omitempty"`
	StoppedAt          int64             `json:"stoppedAt,omitempty"`
	IsCancelled        bool              `json:"isCancelled"`
	IsTerminated       bool              `json:"isTerminated"`
	Parameters         map[string]string `json:"parameters,omitempty"`
	Tags               map[string]string `json:"tags,omitempty"`
	PropagateTags      *bool             `json:"propagateTags,omitempty"`
	ShareIdentifier    *string           `json:"shareIdentifier,omitempty"`
	SchedulingPriority *int32            `json:"schedulingPriority,omitempty"`
	DependsOn          []dependency      `json:"dependsOn,omitempty"`
	RetryStrategy      *struct {
		Attempts int `json:"attempts"`
	} `json:"retryStrategy,omitempty"`
	Timeout *struct {
		AttemptDurationSeconds int `json:"attemptDurationSeconds"`
	} `json:"timeout,omitempty"`
	Container       *containerDetail `json:"container,omitempty"`
	Attempts        []attemptDetail  `json:"attempts"`
	ArrayProperties *arrayDetail     `json:"arrayProperties,omitempty"`
}

type containerDetail struct {
	Command              []string              `json:"command,omitempty"`
	Environment          []keyValue            `json:"environment,omitempty"`
	ResourceRequirements []resourceRequirement `json:"resourceRequirements,omitempty"`
	ExitCode             *int                  `json:"exitCode,omitempty"`
	Reason               string                `json:"reason,omitempty"`
	LogStreamName        string                `json:"logStreamName,omitempty"`
}

type attemptDetail struct {
	Container    attemptContainer `json:"container"`
	StartedAt    int64            `json:"startedAt"`
	StoppedAt    int64            `json:"stoppedAt"`
	StatusReason string           `json:"statusReason,omitempty"`
}

type attemptContainer struct {
	ExitCode      *int   `json:"exitCode,omitempty"`
	Reason        string `json:"reason,omitempty"`
	LogStreamName string `json:"logStreamName,omitempty"`
}

type arrayDetail struct {
	Size                       int              `json:"size,omitempty"`
	Index                      *int             `json:"index,omitempty"`
	StatusSummary              map[string]int32 `json:"statusSummary,omitempty"`
	StatusSummaryLastUpdatedAt int64            `json:"statusSummaryLastUpdatedAt,omitempty"`
}

type listJobsInput struct {
	JobQueue       string          `json:"jobQueue"`
	ArrayJobID     string          `json:"arrayJobId"`
	MultiNodeJobID string          `json:"multiNodeJobId"`
	JobStatus      string          `json:"jobStatus"`
	Filters        []keyValuesPair `json:"filters"`
	MaxResults     *int            `json:"maxResults"`
	NextToken      string          `json:"nextToken"`
}

type keyValuesPair struct {
	Name   string   `json:"name"`
	Values []string `json:"values"`
}

type listJobsOutput struct {
	JobSummaryList []jobSummary `json:"jobSummaryList"`
	NextToken      string       `json:"nextToken,omitempty"`
}

type jobSummary struct {
	JobID           string          `json:"jobId"`
	JobName         string          `json:"jobName"`
	JobArn          string          `json:"jobArn"`
	JobDefinition   string          `json:"jobDefinition"`
	Status          string          `json:"status"`
	StatusReason    string          `json:"statusReason,omitempty"`
	CreatedAt       int64           `json:"createdAt"`
	StartedAt       int64           `json:"startedAt,omitempty"`
	StoppedAt       int64           `json:"stoppedAt,omitempty"`
	ShareIdentifier *string         `json:"shareIdentifier,omitempty"`
	ArrayProperties *arrayDetail    `json:"arrayProperties,omitempty"`
	Container       *summaryExitBox `json:"container,omitempty"`
}

type summaryExitBox struct {
	ExitCode *int   `json:"exitCode,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

type stopJobInput struct {
	JobID  *string `json:"jobId"`
	Reason *string `json:"reason"`
}

type queueSnapshotInput struct {
	JobQueue *string `json:"jobQueue"`
}

type queueSnapshotOutput struct {
	FrontOfQueue frontOfQueue `json:"frontOfQueue"`
}

type frontOfQueue struct {
	Jobs          []frontJob `json:"jobs"`
	LastUpdatedAt int64      `json:"lastUpdatedAt"`
}

type frontJob struct {
	JobArn                 string `json:"jobArn"`
	EarliestTimeAtPosition int64  `json:"earliestTimeAtPosition"`
}

type errorBody struct {
	Type    string `json:"__type"`
	Message string `json:"message"`
}
