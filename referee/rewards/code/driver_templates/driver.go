// referee's function_tests driver (Go), placed after the program; its imports (aliased
// referee_*) are on the package clause's line. Its placeholders are filled in.
func referee_emit(b *referee_strings.Builder, v referee_reflect.Value) {
	switch v.Kind() {
	case referee_reflect.Invalid:
		b.WriteString("null")
	case referee_reflect.Bool:
		b.WriteString(referee_strconv.FormatBool(v.Bool()))
	case referee_reflect.Int, referee_reflect.Int8, referee_reflect.Int16, referee_reflect.Int32,
		referee_reflect.Int64:
		b.WriteString(referee_strconv.FormatInt(v.Int(), 10))
	case referee_reflect.Uint, referee_reflect.Uint8, referee_reflect.Uint16,
		referee_reflect.Uint32, referee_reflect.Uint64, referee_reflect.Uintptr:
		b.WriteString(referee_strconv.FormatUint(v.Uint(), 10))
	case referee_reflect.Float32, referee_reflect.Float64:
		f := v.Float()
		switch {
		case referee_math.IsNaN(f):
			b.WriteString("NaN")
		case referee_math.IsInf(f, 1):
			b.WriteString("Infinity")
		case referee_math.IsInf(f, -1):
			b.WriteString("-Infinity")
		default:
			b.WriteString(referee_strconv.FormatFloat(f, 'g', -1, v.Type().Bits()))
		}
	case referee_reflect.String:
		s, _ := referee_json.Marshal(v.String())
		b.Write(s)
	case referee_reflect.Slice, referee_reflect.Array:
		b.WriteByte('[')
		for i := 0; i < v.Len(); i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			referee_emit(b, v.Index(i))
		}
		b.WriteByte(']')
	case referee_reflect.Map:
		b.WriteByte('{')
		for i, k := range v.MapKeys() {
			if i > 0 {
				b.WriteByte(',')
			}
			var key referee_strings.Builder
			if k.Kind() == referee_reflect.String {
				key.WriteString(k.String())
			} else {
				referee_emit(&key, k)
			}
			s, _ := referee_json.Marshal(key.String())
			b.Write(s)
			b.WriteByte(':')
			referee_emit(b, v.MapIndex(k))
		}
		b.WriteByte('}')
	case referee_reflect.Ptr, referee_reflect.Interface:
		if v.IsNil() {
			b.WriteString("null")
		} else {
			referee_emit(b, v.Elem())
		}
	default:
		panic("referee: cannot print a " + v.Type().String() + " as JSON")
	}
}

func main() {
	referee_line, _ := referee_bufio.NewReader(referee_os.Stdin).ReadString('\n')
	referee_case, referee_err := referee_strconv.Atoi(referee_strings.TrimSpace(referee_line))
	if referee_err != nil {
		referee_os.Stderr.WriteString("referee: no case index\n")
		referee_os.Exit(2)
	}
	var referee_results []interface{}
	switch referee_case {
@CASES@
	default:
		referee_os.Stderr.WriteString("referee: no such case\n")
		referee_os.Exit(2)
	}
	var referee_out referee_strings.Builder
	switch len(referee_results) {
	case 0:
		referee_out.WriteString("null")
	case 1:
		referee_emit(&referee_out, referee_reflect.ValueOf(referee_results[0]))
	default:
		referee_emit(&referee_out, referee_reflect.ValueOf(referee_results))
	}
	referee_os.Stdout.WriteString("\n@MARKER@\n" + referee_out.String() + "\n")
}
