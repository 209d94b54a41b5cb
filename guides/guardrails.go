package guides

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/switchboard-gw/switchboard/guardrails"
)

// Guardrails are a guide's checks on what goes into the model and what
// comes out of it (front matter "guardrails"):
//
//	guardrails:
//	  input:
//	    mask: [email, phone]            # built-in detectors, by name
//	    block:
//	      - pattern: '(?i)password\s*[:=]'
//	        message: Please never send passwords here.
//	  output:
//	    mask: [credit_card, secret, {name: ticket, pattern: 'ACME-\d{6}', with: '[ticket]'}]
type Guardrails struct {
	Input, Output *guardrails.Guard
	// Rules names each side's rules, in order, for the doctor.
	Rules map[string][]string
}

func (p parser) guardrails(n *yaml.Node, out *Guardrails) error {
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return p.errorf(n, "guardrails: must be a mapping with input and/or output")
	}
	out.Rules = map[string][]string{}
	return p.mapping(n, "guardrails.", func(side string, k, v *yaml.Node) error {
		var guard **guardrails.Guard
		switch side {
		case "input":
			guard = &out.Input
		case "output":
			guard = &out.Output
		default:
			return p.errorf(k, "guardrails: unknown key %q: want input or output", side)
		}
		if isNull(v) {
			return nil
		}
		if v.Kind != yaml.MappingNode {
			return p.errorf(v, "guardrails.%s: must be a mapping with block and/or mask", side)
		}
		var rules []guardrails.Rule
		err := p.mapping(v, "guardrails."+side+".", func(action string, k, v *yaml.Node) error {
			a := guardrails.Action(action)
			if a != guardrails.Block && a != guardrails.Mask {
				return p.errorf(k, "guardrails.%s: unknown key %q: want block or mask", side, action)
			}
			key := "guardrails." + side + "." + action
			if isNull(v) {
				return nil
			}
			if v.Kind != yaml.SequenceNode {
				return p.errorf(v, "%s: must be a list of detectors (%s) or rules ({pattern: …})", key, detectorList())
			}
			for i, item := range v.Content {
				spec, err := p.ruleSpec(item, fmt.Sprintf("%s[%d]", key, i))
				if err != nil {
					return err
				}
				r, err := guardrails.Compile(a, spec, i+1)
				if err != nil {
					return p.errorf(item, "%s[%d]: %v", key, i, err)
				}
				rules = append(rules, r)
				out.Rules[side] = append(out.Rules[side], fmt.Sprintf("%s %s", a, r.Name))
			}
			return nil
		})
		*guard = guardrails.New(rules...)
		return err
	})
}

// ruleSpec reads a rule: a detector's name, or a mapping.
func (p parser) ruleSpec(n *yaml.Node, key string) (guardrails.RuleSpec, error) {
	var spec guardrails.RuleSpec
	if n.Kind == yaml.ScalarNode {
		spec.Detector = n.Value
		return spec, nil
	}
	if n.Kind != yaml.MappingNode {
		return spec, p.errorf(n, "%s: a detector's name (%s) or a rule ({pattern: …, with: …})", key, detectorList())
	}
	err := p.mapping(n, key+".", func(field string, k, v *yaml.Node) error {
		switch field {
		case "name":
			return p.str(v, key+".name", &spec.Name)
		case "detector":
			return p.str(v, key+".detector", &spec.Detector)
		case "pattern":
			return p.str(v, key+".pattern", &spec.Pattern)
		case "with":
			return p.str(v, key+".with", &spec.With)
		case "message":
			return p.str(v, key+".message", &spec.Message)
		}
		return p.errorf(k, "%s: unknown key %q: want name, detector, pattern, with or message", key, field)
	})
	return spec, err
}

func detectorList() string { return strings.Join(guardrails.Detectors(), ", ") }
